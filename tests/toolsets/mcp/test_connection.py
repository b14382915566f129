"""Sessions that heal and the protocol era each server is spoken to in (toolsets.mcp.connection),
against the SDK-built test server in a process of its own, restarted between calls."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from toolsets.executor import execute
from toolsets.mcp import connection
from toolsets.mcp.models import MCPServer

from .conftest import Restartable, register

pytestmark = pytest.mark.django_db(transaction=True)


async def _pid(user: Any, slug: str, call_id: str) -> str:
    done = await execute(f"toolset__mcp_{slug}__pid", {}, user_id=user.pk, tool_call_id=call_id, pre_approved=True)
    assert done.ok, done.error
    return str(done.result["content"][0]["text"])


async def _register(slug: str, port: int) -> Any:
    return await sync_to_async(register)(
        name=f"Server {slug}", slug=slug, transport="http", url=f"http://127.0.0.1:{port}/mcp"
    )


async def test_a_restarted_handshake_era_server_gets_a_new_session_and_the_call_is_retried(
    transactional_db: Any, user: Any, legacy_http_server: Restartable
) -> None:
    server = await _register("legacy", legacy_http_server.port)
    assert server.protocol_version == "2025-11-25"
    first = await _pid(user, "legacy", "c1")
    await sync_to_async(legacy_http_server.restart)()
    # The old session id is unknown to the new process ("Session not found"): the call is not
    # an error, it runs once in a new session.
    second = await _pid(user, "legacy", "c2")
    assert second != first
    assert await _pid(user, "legacy", "c3") == second


async def test_a_restarted_stateless_server_needs_nothing(
    transactional_db: Any, user: Any, restartable_http_server: Restartable
) -> None:
    server = await _register("modern", restartable_http_server.port)
    assert server.protocol_version == "2026-07-28"
    first = await _pid(user, "modern", "c1")
    await sync_to_async(restartable_http_server.restart)()
    assert await _pid(user, "modern", "c2") != first


async def test_an_idle_pooled_session_is_checked_before_use(
    transactional_db: Any, user: Any, legacy_http_server: Restartable, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolsets.mcp import client

    await _register("idle", legacy_http_server.port)
    await _pid(user, "idle", "c1")
    (pooled,) = client.pool().connections.values()
    monkeypatch.setattr(connection, "CHECK_IDLE_AFTER_S", 0.0)
    await sync_to_async(legacy_http_server.restart)()
    await pooled.check()  # the ping fails on the dead session: it is renewed before any call
    assert not pooled.connected
    await _pid(user, "idle", "c2")
    assert pooled.connected


async def test_the_admin_sees_the_revision_each_server_speaks(
    transactional_db: Any, legacy_http_server: Restartable, restartable_http_server: Restartable
) -> None:
    legacy = await _register("old", legacy_http_server.port)
    modern = await _register("new", restartable_http_server.port)
    assert "protocol 2025-11-25" in legacy.refresh_message
    assert "protocol 2026-07-28" in modern.refresh_message
    stored = await MCPServer.objects.aget(pk=modern.pk)
    assert stored.protocol_version == "2026-07-28"


def test_session_loss_is_told_apart_from_other_errors() -> None:
    from mcp.shared.exceptions import MCPError

    assert connection.session_lost(MCPError(-32600, "Session not found"))
    assert connection.session_lost(MCPError(-32000, "Bad Request: No valid session ID provided"))
    assert connection.session_lost(MCPError(-32600, "Session terminated"))
    assert not connection.session_lost(MCPError(-32603, "Server returned an error response"))
    assert not connection.session_lost(MCPError(-32602, "Invalid params: session not found in arguments"))
