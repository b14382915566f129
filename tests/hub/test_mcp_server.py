"""Tessera's MCP server at /mcp (hub/mcp_server.py), through the official `mcp` SDK's client
against the real stack, in both eras: the 2026-07-28 stateless revision and the handshake era."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from mcp.client import Client

from chat.models import AppSettings
from hub.models import ApiToken
from tests.stdio_servers import forked
from toolsets.models import ToolExecution, ToolRule

from .mcp_client import MODES, run, signed_in

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _run(stack: Any, token: str, mode: str, work: Callable[[Client], Awaitable[Any]], **options: Any) -> Any:
    return run(stack.url, token, mode, work, **options)


@pytest.mark.parametrize("mode", MODES)
def test_a_client_lists_the_tools_usable_for_its_user_with_truthful_annotations(
    stack: Any, switched_on: None, token: str, mode: str
) -> None:
    ToolRule.objects.create(toolset_id="clock_math", tool="current_time", policy="deny")

    async def work(client: Client) -> Any:
        return await client.list_tools()

    tools = {tool.name: tool for tool in _run(stack, token, mode, work).tools}
    calculate = tools["toolset__clock_math__calculate"]
    assert calculate.input_schema["type"] == "object" and calculate.description
    assert calculate.annotations is not None and calculate.annotations.read_only_hint is True
    # A tool whose policy is Deny is never listed; a toolset the user cannot use is not either.
    assert "toolset__clock_math__current_time" not in tools
    assert not any(name.startswith("toolset__exa__") for name in tools)
    assert not any(name.startswith("toolset__workspace__") for name in tools)
    # Agents are tools too.
    assert "delegate_to_researcher" in tools and "delegate_to_general" in tools


@pytest.mark.parametrize("mode", MODES)
def test_a_call_goes_through_the_executor_and_is_audited_with_the_clients_name(
    stack: Any, switched_on: None, token: str, user: Any, mode: str
) -> None:
    async def work(client: Client) -> Any:
        return await client.call_tool("toolset__clock_math__calculate", {"expression": "12 * 34"})

    result = _run(stack, token, mode, work)
    assert not result.is_error
    assert "408" in result.content[0].text
    assert result.structured_content is not None
    record = ToolExecution.objects.get(user=user, tool="calculate")
    assert record.status == "success"
    # The client's own name: every 2026 request carries it, a handshake-era session said it once.
    assert record.client == "mcp: Test Desktop"


def test_bad_arguments_and_unknown_tools_are_error_results(stack: Any, switched_on: None, token: str) -> None:
    async def work(client: Client) -> Any:
        bad = await client.call_tool("toolset__clock_math__calculate", {"expression": 12})
        unknown = await client.call_tool("toolset__nope__nothing", {})
        return bad, unknown

    bad, unknown = _run(stack, token, "auto", work)
    assert bad.is_error and "validation_error" in bad.content[0].text
    assert unknown.is_error and "unknown_tool" in unknown.content[0].text


def test_an_ask_tool_runs_only_for_a_token_that_may_approve(
    stack: Any, switched_on: None, token: str, user: Any
) -> None:
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")

    async def work(client: Client) -> Any:
        return await client.call_tool("toolset__clock_math__calculate", {"expression": "2 + 2"})

    refused = _run(stack, token, "auto", work)
    assert refused.is_error and "May approve" in refused.content[0].text
    approving = ApiToken.issue(user, "trusted", can_approve=True)[1]
    allowed = _run(stack, approving, "auto", work)
    assert not allowed.is_error and "4" in allowed.content[0].text


def test_an_agent_runs_in_a_worker_and_reports_progress(
    stack: Any, switched_on: None, token: str, user: Any, demo_model: Any
) -> None:
    from toolsets.workspace.sample_data import seed_for_user

    seed_for_user(user)
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def work(client: Client) -> Any:
        return await client.call_tool(
            "delegate_to_workspace_assistant", {"task": "List my tasks"}, progress_callback=on_progress
        )

    result = _run(stack, token, "legacy", work)
    assert not result.is_error, result.content
    assert result.content[0].text
    run = ToolExecution.objects.get(user=user, toolset="workspace", tool="list_tasks")
    assert run.status == "success" and run.client == "mcp: Test Desktop"
    # What the chat's tool cards would say, as notifications.
    assert any("task" in text.lower() for text in messages), messages


def test_without_a_valid_token_or_when_off_nothing_is_served(stack: Any, token: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    off = httpx.post(f"{stack.url}/mcp", json=body, headers=headers, timeout=30)
    assert off.status_code == 404
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()
    wrong = httpx.post(f"{stack.url}/mcp", json=body, headers={**headers, "Authorization": "Bearer tsk_wrong"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
    # DNS rebinding: a page on another origin cannot reach it through the user's browser.
    foreign = httpx.post(f"{stack.url}/mcp", json=body, headers={**headers, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    rebound = httpx.post(f"{stack.url}/mcp", json=body, headers={**headers, "Host": "evil.example"})
    assert rebound.status_code == 421


def test_a_token_reaches_only_what_it_was_created_for(stack: Any, switched_on: None, user: Any) -> None:
    agents_only = ApiToken.issue(user, "agents only", tools=False)[1]
    tools_only = ApiToken.issue(user, "tools only", agents=False)[1]

    async def listing(client: Client) -> Any:
        return [tool.name for tool in (await client.list_tools()).tools]

    async def calling(client: Client) -> Any:
        return await client.call_tool("toolset__clock_math__calculate", {"expression": "1 + 1"})

    names = _run(stack, agents_only, "auto", listing)
    assert names and all(name.startswith("delegate_to_") for name in names)
    refused = _run(stack, agents_only, "auto", calling)
    assert refused.is_error and "may not run tools" in refused.content[0].text
    names = _run(stack, tools_only, "auto", listing)
    assert "toolset__clock_math__calculate" in names and not any(n.startswith("delegate_to_") for n in names)


def test_the_admin_chooses_what_the_server_exposes(stack: Any, switched_on: None, token: str, user: Any) -> None:
    settings = AppSettings.load()
    settings.mcp_server_toolsets = ["web"]
    settings.mcp_server_agents = ["general"]
    settings.save()

    async def work(client: Client) -> Any:
        names = [tool.name for tool in (await client.list_tools()).tools]
        hidden = await client.call_tool("toolset__clock_math__calculate", {"expression": "1 + 1"})
        return names, hidden

    names, hidden = _run(stack, token, "auto", work)
    assert any(n.startswith("toolset__web__") for n in names)
    assert not any(n.startswith("toolset__clock_math__") for n in names)
    assert [n for n in names if n.startswith("delegate_to_")] == ["delegate_to_general"]
    # Not listed is not callable either: refused, and in the audit log.
    assert hidden.is_error and "permission_denied" in hidden.content[0].text
    assert ToolExecution.objects.get(user=user, tool="calculate").error_type == "permission_denied"


def test_groups_decide_what_a_client_sees_as_in_the_chat(stack: Any, switched_on: None, token: str, user: Any) -> None:
    from django.contrib.auth.models import Group

    from toolsets.models import ToolsetConfig

    staff = Group.objects.create(name="staff")
    ToolsetConfig.objects.update_or_create(toolset_id="clock_math")[0].groups.add(staff)

    async def listing(client: Client) -> Any:
        return [tool.name for tool in (await client.list_tools()).tools]

    assert not any(n.startswith("toolset__clock_math__") for n in _run(stack, token, "auto", listing))
    user.groups.add(staff)  # a membership change counts from the next request
    assert "toolset__clock_math__calculate" in _run(stack, token, "auto", listing)


# ---- Progress, cancellation and sources on plain tool calls --------------------------------


@pytest.fixture
def test_server(transactional_db: Any) -> Any:
    """Tessera's own test MCP server (tests/toolsets/mcp/server.py), added as a toolset: its
    tools report progress, sleep until cancelled, and link resources of their own."""

    from tests.toolsets.mcp.conftest import SERVER, register, seen_by_stack

    server = register(name="Test server", slug="t1", transport="stdio", **forked(SERVER), timeout_s=30)
    # Tools of an MCP server ask before they run unless they say they only read: these may run.
    for tool in ("steps", "slow", "linked", "picture", "audiences"):
        ToolRule.objects.create(toolset_id="mcp_t1", tool=tool, policy="auto")
    seen_by_stack()
    return server


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_tool_call_relays_the_tools_progress(
    stack: Any, switched_on: None, token: str, test_server: Any, mode: str
) -> None:
    messages: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append((progress, total, message))

    async def work(client: Client) -> Any:
        return await client.call_tool("toolset__mcp_t1__steps", {"count": 3}, progress_callback=on_progress)

    result = _run(stack, token, mode, work)
    assert not result.is_error, result.content
    texts = [message for _, _, message in messages]
    assert [t for t in texts if t and t.startswith("Step ")] == ["Step 1 of 3", "Step 2 of 3", "Step 3 of 3"], texts
    # Progress only grows, as the specification requires.
    values = [progress for progress, _, _ in messages]
    assert values == sorted(values) and len(set(values)) == len(values)


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_call_stops_the_tool_and_is_audited(
    stack: Any, switched_on: None, token: str, user: Any, test_server: Any, mode: str, tmp_path: Any
) -> None:
    import anyio

    marker = tmp_path / f"cancelled-{mode}"

    async def work(client: Client) -> Any:
        running = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message == "Sleeping":
                running.set()  # the MCP server is inside the tool

        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool(
                    "toolset__mcp_t1__slow", {"seconds": 60, "marker": str(marker)}, progress_callback=on_progress
                )

            group.start_soon(call)
            with anyio.fail_after(20):
                await running.wait()
            group.cancel_scope.cancel()  # the client gives up on the call
        return None

    started = time.monotonic()
    _run(stack, token, mode, work)
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not marker.exists():
        time.sleep(0.2)
    # The MCP server that ran the tool was told to stop (it wrote its marker)…
    assert marker.exists() and marker.read_text() == "cancelled"
    # …and the audit log says the call was cancelled.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        record = ToolExecution.objects.get(user=user, tool="slow")
        if record.status != "running":
            break
        time.sleep(0.2)
    assert (record.status, record.client) == ("cancelled", "mcp: Test Desktop")


def test_a_cancelled_agent_stops_its_turn(
    stack: Any, switched_on: None, token: str, user: Any, demo_model: Any
) -> None:
    import anyio

    from chat.models import Turn

    async def work(client: Client) -> Any:
        with anyio.move_on_after(2):
            await client.call_tool(
                "delegate_to_general", {"task": "[demo:slow] Explain the history of the web in detail."}
            )

    _run(stack, token, "legacy", work)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        turn = Turn.objects.filter(chat__owner=user).first()
        if turn is not None and turn.status not in Turn.ACTIVE:
            break
        time.sleep(0.2)
    assert turn is not None and turn.status == Turn.Status.CANCELLED


def test_sources_of_any_kind_become_links_a_client_can_open(
    stack: Any, switched_on: None, token: str, user: Any, test_server: Any
) -> None:
    from toolsets.workspace.sample_data import seed_for_user

    seed_for_user(user)

    async def work(client: Client) -> Any:
        tasks = await client.call_tool("toolset__workspace__list_tasks", {})
        linked = await client.call_tool("toolset__mcp_t1__linked", {})
        return tasks, linked

    tasks, linked = _run(stack, token, "auto", work)
    assert not tasks.is_error and not linked.is_error
    # A Workspace item has no page: its citation is text, numbered as the chat numbers it.
    cited = [block.text for block in tasks.content if block.type == "text" and block.text.startswith("Sources:")]
    assert cited and "[1] Task: " in cited[0]
    # A resource of another MCP server: a Tessera page that reads it with the user's access.
    links = [block for block in linked.content if block.type == "resource_link"]
    assert len(links) == 1 and links[0].uri.startswith(f"{stack.url}/toolsets/mcp/t1/resource/?uri=notes%3A%2F%2Ftoday")
    page = httpx.get(links[0].uri, cookies=signed_in(user), timeout=30)
    assert page.status_code == 200 and "Buy" in page.text and "<b>milk</b>" not in page.text


def test_an_mcp_servers_own_content_passes_through_with_its_audience(
    stack: Any, switched_on: None, token: str, test_server: Any
) -> None:
    async def work(client: Client) -> Any:
        return await client.call_tool("toolset__mcp_t1__picture", {}), await client.call_tool(
            "toolset__mcp_t1__audiences", {}
        )

    picture, audiences = _run(stack, token, "auto", work)
    images = [block for block in picture.content if block.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png" and images[0].data
    shown = {
        block.text: (block.annotations.audience if block.annotations else None)
        for block in audiences.content
        if block.type == "text"
    }
    assert shown == {"For your eyes.": ["user"], "For the model.": ["assistant"], "For both.": None}
