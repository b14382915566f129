"""MCP servers as toolsets, against real servers built with the SDK (tests/toolsets/mcp/server.py)
over stdio and streamable HTTP, through the one executor."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from chat import tool_content
from tests.stdio_servers import forked
from toolsets import availability
from toolsets.executor import execute
from toolsets.mcp import catalog, names, untrusted
from toolsets.mcp.models import MCPServer
from toolsets.models import ToolExecution, UserToolsetConfig

from .conftest import SERVER, register

pytestmark = pytest.mark.django_db(transaction=True)


def name(tool: str, slug: str = "t1") -> str:
    return f"toolset__mcp_{slug}__{tool}"


async def test_discovery_lists_the_servers_tools_with_its_name_and_version(stdio_server: Any, user: Any) -> None:
    listed = {t["name"] for t in stdio_server.tools}
    assert {"echo", "steps", "fail", "picture", "slow", "crash", "grow"} <= listed
    assert (stdio_server.server_name, stdio_server.server_version) == ("test-server", "9.9")
    assert "test-server 9.9" in stdio_server.refresh_message
    state = (await sync_to_async(availability.for_user)(user.pk))["mcp_t1"]
    assert state.usable
    echo = state.toolset.get("echo")
    assert echo is not None and echo.parameters["required"] == ["text"]


async def test_a_call_returns_the_content_and_is_audited(stdio_server: Any, user: Any) -> None:
    execution = await execute(name("echo"), '{"text": "hi"}', user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert execution.ok, execution.error
    assert execution.result["content"] == [{"type": "text", "text": "echo: hi"}]
    assert execution.model_content(1000) == "echo: hi"
    record = await ToolExecution.objects.aget(pk=execution.record_id or 0)
    assert (record.toolset, record.tool, record.status) == ("mcp_t1", "echo", "success")


async def test_arguments_are_validated_against_the_servers_schema(stdio_server: Any, user: Any) -> None:
    execution = await execute(name("echo"), '{"text": 5}', user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert execution.error is not None and execution.error.type == "validation_error"
    assert any("text" in detail for detail in execution.error.details)


async def test_progress_notifications_reach_the_progress_callback(stdio_server: Any, user: Any) -> None:
    seen: list[tuple[str, float | None]] = []

    def progress(text: str, percent: float | None = None) -> None:
        seen.append((text, percent))

    execution = await execute(
        name("steps"), {"count": 3}, user_id=user.pk, tool_call_id="c1", pre_approved=True, progress=progress
    )
    assert execution.ok
    assert seen == [
        ("Connecting to Test server", None),  # the first call starts the server
        ("Step 1 of 3", pytest.approx(100 / 3)),
        ("Step 2 of 3", pytest.approx(200 / 3)),
        ("Step 3 of 3", 100),
    ]


async def test_an_is_error_result_is_an_execution_error_the_model_reads(stdio_server: Any, user: Any) -> None:
    execution = await execute(
        name("fail"), {"reason": "on purpose"}, user_id=user.pk, tool_call_id="c1", pre_approved=True
    )
    assert execution.error is not None and execution.error.type == "execution_error"
    assert "it broke: on purpose" in execution.model_content(1000)


async def test_an_image_result_is_shown_in_the_card_and_described_to_the_model(stdio_server: Any, user: Any) -> None:
    execution = await execute(name("picture"), {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert execution.ok
    block = execution.result["content"][0]
    assert block["type"] == "image" and block["mimeType"] == "image/png"
    html = tool_content.render(execution.result)
    assert html is not None and '<img class="tc-image"' in html and 'src="data:image/png;base64,iVBOR' in html
    assert "base64" not in execution.model_content(10_000)
    assert "image" in execution.model_content(10_000)


async def test_cancelling_a_call_sends_the_protocols_cancellation(stdio_server: Any, user: Any, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    running = asyncio.Event()

    def progress(text: str, percent: float | None = None) -> None:
        if text == "Sleeping":
            running.set()  # the server is inside the tool

    task = asyncio.ensure_future(
        execute(
            name("slow"),
            {"seconds": 30, "marker": str(marker)},
            user_id=user.pk,
            tool_call_id="c1",
            pre_approved=True,
            progress=progress,
        )
    )
    await asyncio.wait_for(running.wait(), 20)
    task.cancel()  # what Stop does to a running tool
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if marker.exists():
            break
        await asyncio.sleep(0.1)
    assert marker.read_text() == "cancelled"


async def test_a_hanging_call_times_out_without_holding_up_other_calls(
    stdio_server: Any, user: Any, tmp_path: Path
) -> None:
    await MCPServer.objects.filter(pk=stdio_server.pk).aupdate(timeout_s=1)
    await sync_to_async(_refresh_registry)()
    # A 1 s budget may not cover starting the server: the start goes on in the background.
    for _ in range(20):
        if (await execute(name("echo"), {"text": "warm"}, user_id=user.pk, tool_call_id="c0", pre_approved=True)).ok:
            break
        await asyncio.sleep(0.5)
    slow = asyncio.ensure_future(
        execute(
            name("slow"),
            {"seconds": 30, "marker": str(tmp_path / "m")},
            user_id=user.pk,
            tool_call_id="c1",
            pre_approved=True,
        )
    )
    await asyncio.sleep(0.3)
    quick = await execute(name("echo"), {"text": "meanwhile"}, user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert quick.ok and not slow.done()
    timed_out = await slow
    assert timed_out.error is not None and timed_out.error.type == "timeout_error"


async def test_a_server_killed_mid_call_fails_that_call_and_is_restarted(stdio_server: Any, user: Any) -> None:
    first = await execute(name("pid"), {}, user_id=user.pk, tool_call_id="c0", pre_approved=True)
    crashed = await execute(name("crash"), {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert crashed.error is not None and crashed.error.type == "execution_error"
    assert "closed the connection" in crashed.error.message
    again = await execute(name("pid"), {}, user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert again.ok, again.error
    assert again.result["content"][0]["text"] != first.result["content"][0]["text"]  # a new process


async def test_tools_list_changed_refreshes_the_stored_tools(stdio_server: Any, user: Any) -> None:
    execution = await execute(name("grow"), {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert execution.ok
    for _ in range(50):
        server = await MCPServer.objects.aget(pk=stdio_server.pk)
        if any(t["name"] == "added" for t in server.tools):
            break
        await asyncio.sleep(0.1)
    assert any(t["name"] == "added" for t in server.tools)
    # A tool the server adds is held until an admin accepts it (test_trust.py).
    assert await sync_to_async(catalog.approve)(server) == ["added"]
    await sync_to_async(_refresh_registry)()
    added = await execute(name("added"), {"x": 21}, user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert added.ok and added.result["content"][0]["text"] == "42"


async def test_an_unreachable_server_gives_a_clear_error_and_an_availability_reason(
    transactional_db: Any, user: Any
) -> None:
    server = await sync_to_async(register)(
        name="Broken", slug="broken", transport="stdio", command="/nonexistent/mcp-server", timeout_s=5
    )
    assert "command not found" in server.refresh_message
    state = (await sync_to_async(availability.for_user)(user.pk))["mcp_broken"]
    assert state.reason == catalog.UNREACHABLE and "command not found" in state.detail


def _refresh_registry() -> None:
    from toolsets.registry import all_toolsets

    catalog.invalidate()
    all_toolsets()


async def test_per_user_credentials_go_to_the_server_as_each_users_header(
    transactional_db: Any, user: Any, other_user: Any, http_server_url: str
) -> None:
    await UserToolsetConfig.objects.acreate(user=user, toolset_id="mcp_h1", api_key="tok-alice")
    server = await sync_to_async(register)(
        name="HTTP", slug="h1", transport="http", url=http_server_url, credential="user_token", _as=user.pk
    )
    assert "whoami" in {t["name"] for t in server.tools}, server.refresh_message
    mine = await execute(name("whoami", "h1"), {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    # The server took alice's token (it refuses any other) and echoed it: the echo is redacted.
    assert mine.ok and mine.result["content"][0]["text"] == "[redacted]"
    # The other user has no token yet: not usable, and said why.
    theirs = (await sync_to_async(availability.for_user)(other_user.pk))["mcp_h1"]
    assert theirs.reason == availability.NO_API_KEY
    await UserToolsetConfig.objects.acreate(user=other_user, toolset_id="mcp_h1", api_key="tok-mallory")
    refused = await execute(name("whoami", "h1"), {}, user_id=other_user.pk, tool_call_id="c2", pre_approved=True)
    assert refused.error is not None and refused.error.type == "permission_denied"
    assert "tok-mallory" not in refused.error.message
    # A refused user never makes the server "unreachable" for the others.
    again = await execute(name("whoami", "h1"), {}, user_id=user.pk, tool_call_id="c3", pre_approved=True)
    assert again.ok


async def test_http_sessions_are_reused_across_calls(transactional_db: Any, user: Any, http_server_url: str) -> None:
    from toolsets.mcp import client

    await sync_to_async(register)(
        name="HTTP",
        slug="h2",
        transport="http",
        url=http_server_url,
        headers=json.dumps({"Authorization": "Bearer tok-bob"}),
    )
    for number in range(3):
        done = await execute(name("whoami", "h2"), {}, user_id=user.pk, tool_call_id=f"c{number}", pre_approved=True)
        assert done.ok and done.result["content"][0]["text"] == "tok-bob"
    assert len(client.pool().connections) == 1


async def test_a_slow_starting_server_does_not_eat_the_first_calls_timeout(transactional_db: Any, user: Any) -> None:
    await sync_to_async(register)(
        name="Slow",
        slug="slow",
        transport="stdio",
        **forked(SERVER),
        env=json.dumps({"SLOW_START_S": "1.5"}),
        timeout_s=1,
    )
    seen: list[str] = []
    done = await execute(
        name("echo", "slow"),
        {"text": "late"},
        user_id=user.pk,
        tool_call_id="c1",
        pre_approved=True,
        progress=lambda text, *_: seen.append(text),
    )
    assert done.ok, done.error
    assert seen == ["Connecting to Slow"]
    again = await execute(
        name("echo", "slow"),
        {"text": "x"},
        user_id=user.pk,
        tool_call_id="c2",
        pre_approved=True,
        progress=lambda text, *_: seen.append(text),
    )
    assert again.ok and seen == ["Connecting to Slow"]


async def test_the_legacy_sse_transport_discovers_calls_and_reports_progress(
    transactional_db: Any, user: Any, sse_server_url: str
) -> None:
    server = await sync_to_async(register)(name="SSE", slug="s1", transport="sse", url=sse_server_url, timeout_s=10)
    assert {"echo", "steps"} <= {t["name"] for t in server.tools}, server.refresh_message
    seen: list[str] = []
    done = await execute(
        name("steps", "s1"),
        {"count": 2},
        user_id=user.pk,
        tool_call_id="c1",
        pre_approved=True,
        progress=lambda text, *_: seen.append(text),
    )
    assert done.ok, done.error
    assert seen == ["Connecting to SSE", "Step 1 of 2", "Step 2 of 2"]
    failed = await execute(name("fail", "s1"), {"reason": "sse"}, user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert failed.error is not None and failed.error.type == "execution_error"


def test_tool_names_stay_provider_safe_unique_and_stable() -> None:
    listed = ["echo", "a" * 200, "a" * 201, "with space", "with__double", "ünïcode", "with_space"]
    keys = names.tool_keys("mcp_" + "x" * 20, listed)
    assert keys["echo"] == "echo"
    assert len(set(keys.values())) == len(listed)
    for key in keys.values():
        full = f"toolset__mcp_{'x' * 20}__{key}"
        assert len(full) <= 64 and "__" not in key
        assert all((c.isalnum() and c.isascii()) or c in "_-" for c in key)
    assert names.tool_keys("mcp_" + "x" * 20, list(reversed(listed))) == keys


def test_untrusted_tool_listings_are_cleaned() -> None:
    kept, skipped = untrusted.clean_tools(
        [
            {"name": "ok", "description": "x\x1b[31m" + "y" * 5000, "inputSchema": {"type": "object"}},
            {"name": "remote", "inputSchema": {"type": "object", "properties": {"a": {"$ref": "http://evil/x"}}}},
            {"name": "notobject", "inputSchema": {"type": "string"}},
            {"name": "broken", "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}}},
            {"name": "", "inputSchema": {"type": "object"}},
            {"name": "ok", "inputSchema": {"type": "object"}},
            {"name": "tasky", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
        ]
    )
    assert [t["name"] for t in kept] == ["ok"]
    assert "\x1b" not in kept[0]["description"] and len(kept[0]["description"]) <= untrusted.MAX_DESCRIPTION
    assert len(skipped) == 6 and "only as a task" in skipped[-1]


def test_the_example_server_is_registered_with_its_tools(transactional_db: Any) -> None:
    from toolsets.mcp.setup import register_example

    text = register_example()
    server = MCPServer.objects.get(slug="units")
    assert "convert" in {t["name"] for t in server.tools}, text
    assert server.command == sys.executable and Path(server.args[0]).exists()


def test_the_test_server_file_exists() -> None:
    assert SERVER.exists()


async def test_a_server_limited_to_groups_is_usable_only_by_their_members(stdio_server: Any, user: Any) -> None:
    """The groups an admin picks for a server reach its toolset (the form saves them after the
    row: the catalog notices that change too), and availability refuses everyone else."""
    from django.contrib.auth.models import Group

    from core.groups import NOT_IN_GROUPS

    staff = await Group.objects.acreate(name="staff")
    server = await MCPServer.objects.aget(slug="t1")
    await sync_to_async(_refresh_registry)()
    assert (await sync_to_async(availability.for_user)(user.pk))["mcp_t1"].usable

    await server.groups.aadd(staff)
    state = (await sync_to_async(availability.for_user)(user.pk))["mcp_t1"]
    assert (state.usable, state.reason) == (False, NOT_IN_GROUPS)
    refused = await execute(name("echo"), '{"text": "hi"}', user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert refused.error is not None and refused.error.message == f"{server.name}: {NOT_IN_GROUPS}."

    await user.groups.aadd(staff)
    allowed = await execute(name("echo"), '{"text": "hi"}', user_id=user.pk, tool_call_id="c2", pre_approved=True)
    assert allowed.ok, allowed.error
