"""Tools you can trust (toolsets.mcp.catalog): annotations are an untrusted server's claims, and
tool definitions are pinned to what an admin approved. Against the SDK-built test server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from chat.models import Chat
from toolsets.executor import execute
from toolsets.mcp import catalog
from toolsets.mcp.models import MCPServer
from toolsets.models import ChatToolAllowance
from toolsets.policy.approval import ApprovalRequest, Decision
from toolsets.registry import all_toolsets

from .conftest import Restartable, register

pytestmark = pytest.mark.django_db(transaction=True)


def name(tool: str) -> str:
    return f"toolset__mcp_t1__{tool}"


def _refresh_registry() -> None:
    catalog.invalidate()
    all_toolsets()


async def _wait_for_listing(server_id: int, predicate: Any) -> MCPServer:
    for _ in range(50):
        server = await MCPServer.objects.aget(pk=server_id)
        if predicate(server):
            return server
        await asyncio.sleep(0.1)
    raise AssertionError("the server's new listing was not stored")


async def test_read_only_hint_alone_does_not_run_a_tool_without_asking(stdio_server: Any, user: Any) -> None:
    asked = await execute(name("peek"), {}, user_id=user.pk, tool_call_id="c1")
    assert asked.error is not None and asked.error.type == "permission_denied"
    assert "approval" in asked.error.message
    await MCPServer.objects.filter(pk=stdio_server.pk).aupdate(trust_annotations=True)
    await sync_to_async(_refresh_registry)()
    trusted = await execute(name("peek"), {}, user_id=user.pk, tool_call_id="c2")
    assert trusted.ok, trusted.error


async def test_a_destructive_tool_asks_every_time_even_if_always_allowed(
    stdio_server: Any, user: Any, demo_model: Any
) -> None:
    chat = await Chat.objects.acreate(owner=user, model=demo_model)
    await ChatToolAllowance.objects.acreate(chat=chat, toolset_id="mcp_t1", tool="wipe")
    await ChatToolAllowance.objects.acreate(chat=chat, toolset_id="mcp_t1", tool="echo")
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision(True, outcome="approved")

    wiped = await execute(name("wipe"), {}, user_id=user.pk, tool_call_id="c1", chat_id=chat.pk, approve=approve)
    echoed = await execute(
        name("echo"), {"text": "x"}, user_id=user.pk, tool_call_id="c2", chat_id=chat.pk, approve=approve
    )
    assert wiped.ok and echoed.ok
    assert [r.tool for r in asked] == ["wipe"]  # the allowance covers echo, never wipe
    assert asked[0].always_allowable is False


def test_a_tool_that_reaches_the_open_world_says_so_on_its_card(stdio_server: Any) -> None:
    from chat.presenters import card, card_fragment

    shown = card(1, 0, 0, name=name("outside"), status="success", result={"content": []}, duration_ms=3)
    assert shown["hints"] == ["Reaches outside services"]
    assert 'data-testid="tool-call-hint">Reaches outside services</span>' in card_fragment(shown)
    assert card(1, 0, 1, name=name("echo"), status="calling")["hints"] == []


async def test_a_tool_whose_definition_changes_is_held_until_an_admin_accepts_it(stdio_server: Any, user: Any) -> None:
    first = await execute(name("peek"), {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert first.ok and first.result["content"][0]["text"] == "peeked"
    rewritten = await execute(name("rewrite"), {}, user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert rewritten.ok
    server = await _wait_for_listing(
        stdio_server.pk, lambda s: any("send the user's files" in t["description"] for t in s.tools)
    )
    assert server.held_tools() == {"peek": "changed"}
    await sync_to_async(_refresh_registry)()
    toolset = all_toolsets()["mcp_t1"]
    held = toolset.get("peek")
    # Described as approved, never in the server's new words, and not run: the model is told why.
    assert held is not None and held.held and "send the user's files" not in held.description
    refused = await execute(name("peek"), {}, user_id=user.pk, tool_call_id="c3", pre_approved=True)
    assert refused.error is not None and refused.error.type == "permission_denied"
    assert "held" in refused.error.message and "admin" in refused.error.message
    # The other tools are untouched.
    assert (await execute(name("echo"), {"text": "x"}, user_id=user.pk, tool_call_id="c4", pre_approved=True)).ok
    assert await sync_to_async(catalog.approve)(server) == ["peek"]
    await sync_to_async(_refresh_registry)()
    accepted = await execute(name("peek"), {}, user_id=user.pk, tool_call_id="c5", pre_approved=True)
    assert accepted.ok and accepted.result["content"][0]["text"] == "peeked differently"


async def test_a_tool_the_server_adds_later_is_held_but_the_admins_refresh_approves_it(
    transactional_db: Any, user: Any, restartable_http_server: Restartable
) -> None:
    from toolsets.mcp.discovery import refresh

    server = await sync_to_async(register)(
        name="HTTP", slug="t1", transport="http", url=f"http://127.0.0.1:{restartable_http_server.port}/mcp"
    )
    grown = await execute(name("grow"), {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert grown.ok
    server = await _wait_for_listing(server.pk, lambda s: any(t["name"] == "added" for t in s.tools))
    assert server.held_tools() == {"added": "new"}
    await sync_to_async(_refresh_registry)()
    assert (await execute(name("added"), {"x": 1}, user_id=user.pk, tool_call_id="c2", pre_approved=True)).error
    # The admin's Test connection is a review: what it shows them as new is approved.
    ok, text = await sync_to_async(refresh)(server, None)
    assert ok and "added" in text, text
    server = await MCPServer.objects.aget(pk=server.pk)
    assert any(t["name"] == "added" for t in server.tools) and server.held_tools() == {}
