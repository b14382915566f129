"""Sessions that heal and the protocol era each server is spoken to in (toolsets.mcp.connection),
against the Python SDK-built test server and the TypeScript SDK's npm
`@modelcontextprotocol/server-everything`, each in a process of its own, restarted between calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.stdio_servers import forked
from toolsets.executor import execute
from toolsets.mcp import connection, transport
from toolsets.mcp.models import MCPServer

from .conftest import Restartable, register
from .test_third_party import EVERYTHING, NODE

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


@pytest.fixture
def everything_server() -> Iterator[Restartable]:
    """npm server-everything over Streamable HTTP (TypeScript SDK: a stale session id is a 400
    "Bad Request: No valid session ID provided"), restartable."""
    server = Restartable(NODE, "streamableHttp")
    server.command = [str(NODE), str(EVERYTHING), "streamableHttp"]
    server.env["PORT"] = str(server.port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def _echo(user: Any, slug: str, call_id: str) -> Any:
    return await execute(
        f"toolset__mcp_{slug}__echo", {"message": call_id}, user_id=user.pk, tool_call_id=call_id, pre_approved=True
    )


async def test_a_restarted_typescript_sdk_server_gets_a_new_session_and_the_call_is_retried(
    transactional_db: Any, user: Any, everything_server: Restartable
) -> None:
    await _register("every", everything_server.port)
    first = await _echo(user, "every", "c1")
    assert first.ok, first.error
    await sync_to_async(everything_server.restart)()
    # The new process answers the old session id with HTTP 400 (its own wording, which the SDK's
    # transport does not pass on): the call runs once in a new session all the same.
    for call_id in ("c2", "c3"):
        done = await _echo(user, "every", call_id)
        assert done.ok, done.error
        assert call_id in done.result["content"][0]["text"]


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


def test_a_session_is_refused_by_status_whatever_the_wording() -> None:
    import httpx2

    def answer(status: int, session: str | None) -> bool:
        headers = {"mcp-session-id": session} if session else {}
        request = httpx2.Request("POST", "http://mcp.test/mcp", headers=headers)
        return transport.session_refused(request, httpx2.Response(status, request=request, text="anything"))

    assert answer(404, "s1") and answer(400, "s1")
    # Without a session id there is no session to renew (a stateless server's 400 is its error).
    assert not answer(400, None) and not answer(404, None)
    assert not answer(500, "s1") and not answer(401, "s1") and not answer(200, "s1")


async def test_a_result_without_result_type_is_complete(transactional_db: Any, user: Any) -> None:
    # A hand-written 2026-07-28 server that leaves `resultType` out of every result (discovery,
    # listing, the call): the revision says "complete" is meant, so nothing fails over it.
    untagged = Path(__file__).with_name("untagged_server.py")
    server = await sync_to_async(register)(
        name="Untagged", slug="untagged", transport="stdio", **forked(untagged), timeout_s=5
    )
    assert server.protocol_version == "2026-07-28", server.refresh_message
    done = await execute(
        "toolset__mcp_untagged__shout", {"text": "quiet"}, user_id=user.pk, tool_call_id="c1", pre_approved=True
    )
    assert done.ok, done.error
    assert done.result["content"][0]["text"] == "QUIET"


def test_an_input_required_result_keeps_its_type() -> None:
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from toolsets.mcp.watched import complete_by_default

    def read(result: dict[str, Any]) -> dict[str, Any]:
        message = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result=result))
        answer = complete_by_default(message).message
        assert isinstance(answer, types.JSONRPCResponse)
        return answer.result

    assert read({"content": []})["resultType"] == "complete"
    assert read({"resultType": "input_required", "inputRequests": {}})["resultType"] == "input_required"
    # Errors and the server's own requests are not results.
    request = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=2, method="ping", params=None))
    assert complete_by_default(request) is request
