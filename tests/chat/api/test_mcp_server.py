"""Tessera's MCP server at /mcp (chat/api/mcp_server.py), through the official `mcp` SDK's client
against the real stack, in both eras: the 2026-07-28 stateless revision and the handshake era."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from chat.models import AppSettings
from toolsets.models import ApiToken, ToolExecution, ToolRule

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MODES = ["auto", "legacy"]


@pytest.fixture
def switched_on(db: Any) -> None:
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()


@pytest.fixture
def token(user: Any) -> str:
    return ApiToken.issue(user, "desktop")[1]


def _run(stack: Any, token: str, mode: str, work: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
            async with Client(
                transport, mode=mode, client_info=types.Implementation(name="Test Desktop", version="1")
            ) as client:  # type: ignore[arg-type]
                return await work(client)

    return asyncio.run(main())


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
    # The client's own name when the request carries it (every 2026 request does), else the token's.
    assert record.client == ("mcp: Test Desktop" if mode == "auto" else "mcp: token desktop")


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
    assert run.status == "success" and run.client == "mcp: token desktop"
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
