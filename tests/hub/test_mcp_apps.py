"""Tessera's cards as MCP Apps at /mcp (hub/mcp_apps.py, hub/mcp_cards.py), through the official
`mcp` client negotiating the extension `io.modelcontextprotocol/ui`, in both eras; and a client
without it, which sees exactly what it saw before."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from toolsets.models import ToolRule

from .mcp_client import MODES, run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

APPS = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]
CARD_TOOLS = {
    "toolset__workspace__list_tasks": "ui://tessera/task-table",
    "toolset__workspace__get_task": "ui://tessera/task-card",
    "toolset__workspace__create_task": "ui://tessera/task-card",
    "toolset__workspace__list_events": "ui://tessera/calendar",
    "toolset__workspace__list_emails": "ui://tessera/email",
    "toolset__workspace__list_meetings": "ui://tessera/meeting",
    "toolset__workspace__get_meeting": "ui://tessera/meeting",
    "toolset__workspace__draft_social_post": "ui://tessera/post-preview",
}


@pytest.fixture
def workspace(user: Any) -> None:
    from toolsets.workspace.sample_data import seed_for_user

    seed_for_user(user)


def _ui(tool: Any) -> dict[str, Any]:
    return dict((tool.meta or {}).get("ui") or {})


@pytest.mark.parametrize("mode", MODES)
def test_a_client_with_the_extension_sees_which_card_each_tool_shows(
    stack: Any, switched_on: None, token: str, workspace: None, mode: str
) -> None:
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")

    async def work(client: Client) -> Any:
        return await client.list_tools()

    tools = {tool.name: tool for tool in run(stack.url, token, mode, work, extensions=APPS).tools}
    for name, uri in CARD_TOOLS.items():
        assert _ui(tools[name]) == {"resourceUri": uri}, name
    # A tool that cites what it read shows the Sources list (the Workspace's own items are its cards').
    assert _ui(tools["toolset__web__fetch_page"])["resourceUri"] == "ui://tessera/sources"
    # An Ask tool this token may not approve waits for its owner: the approval card, marked.
    calculate = tools["toolset__clock_math__calculate"]
    assert _ui(calculate) == {"resourceUri": "ui://tessera/approval"}
    assert calculate.meta is not None and calculate.meta["tessera/asks"] is True
    # A tool with no card has no UI; the approval card's own tool is for the View only.
    assert tools["toolset__clock_math__current_time"].meta is None
    assert _ui(tools["tessera__approval_card"]) == {"resourceUri": "ui://tessera/approval", "visibility": ["app"]}


@pytest.mark.parametrize("mode", MODES)
def test_the_cards_are_self_contained_app_documents_with_a_default_deny_csp(
    stack: Any, switched_on: None, token: str, mode: str
) -> None:
    async def work(client: Client) -> Any:
        listed = await client.list_resources()
        read = {resource.uri: await client.read_resource(resource.uri) for resource in listed.resources}
        return listed, read

    listed, read = run(stack.url, token, mode, work, extensions=APPS)
    uris = {str(resource.uri) for resource in listed.resources}
    assert uris == {*CARD_TOOLS.values(), "ui://tessera/sources", "ui://tessera/approval"}
    assert all(resource.mime_type == APP_MIME_TYPE for resource in listed.resources)
    for uri, result in read.items():
        (content,) = result.contents
        assert str(content.uri) == str(uri) and content.mime_type == APP_MIME_TYPE
        # Nothing beyond the document: every list of declared domains is empty.
        csp = content.meta["ui"]["csp"]
        assert csp == {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
        html = content.text
        assert html.startswith("<!doctype html>") and "default-src 'none'" in html and "connect-src 'none'" in html
        # Inline only: no script, stylesheet, image or frame is fetched from anywhere.
        assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", html)
        assert "--surface" in html and ".gu-card" in html and "ui/initialize" in html  # Tessera's CSS, the View


def test_a_card_result_carries_the_pages_card_and_the_same_content_as_without_the_extension(
    stack: Any, switched_on: None, token: str, workspace: None
) -> None:
    from chat.components import render

    async def work(client: Client) -> Any:
        return await client.call_tool("toolset__workspace__list_tasks", {})

    with_card = run(stack.url, token, "auto", work, extensions=APPS)
    plain = run(stack.url, token, "auto", work)
    assert not with_card.is_error and "tessera/card" not in (plain.meta or {})
    assert [block.model_dump() for block in with_card.content] == [block.model_dump() for block in plain.content]
    assert with_card.structured_content == plain.structured_content
    html = with_card.meta["tessera/card"]["html"]
    # The card the chat's page renders for the same tasks, then the Sources list under it.
    tasks = plain.structured_content["tasks"]
    assert 'data-component="task_table"' in html and all(task["name"] in html for task in tasks)
    fields = ("name", "status", "priority", "dueDate", "assignee")
    shown = [{key: task[key] for key in fields if task.get(key)} for task in tasks]
    page_card = render(f':::component{{type="task_table"}}\n{json.dumps(shown)}\n:::')
    assert html.startswith(page_card)
    assert 'class="sources"' in html and "Task" in html


def test_every_workspace_card_renders_from_its_tools_result(
    stack: Any, switched_on: None, token: str, workspace: None
) -> None:
    # Drafting a post asks first by default; this test is about its card.
    ToolRule.objects.create(toolset_id="workspace", tool="draft_social_post", policy="allow")

    async def work(client: Client) -> Any:
        found = {}
        for name, arguments in (
            ("toolset__workspace__list_events", {}),
            ("toolset__workspace__list_emails", {}),
            ("toolset__workspace__list_meetings", {}),
            ("toolset__workspace__get_task", {"task_id": 1}),
            ("toolset__workspace__draft_social_post", {"platform": "linkedin", "text": "We shipped <b>it</b>!"}),
        ):
            found[name] = await client.call_tool(name, arguments)
        return found

    results = run(stack.url, token, "legacy", work, extensions=APPS)
    kinds = {
        "toolset__workspace__list_events": "calendar_events",
        "toolset__workspace__list_emails": "email_summary",
        "toolset__workspace__list_meetings": "meeting_summary",
        "toolset__workspace__draft_social_post": "social_post",
    }
    for name, kind in kinds.items():
        result = results[name]
        assert not result.is_error, result.content
        html = result.meta["tessera/card"]["html"]
        assert f'data-component="{kind}"' in html and "gen-ui-invalid" not in html, name
    post = results["toolset__workspace__draft_social_post"].meta["tessera/card"]["html"]
    assert "&lt;b&gt;it&lt;/b&gt;" in post and "<b>" not in post  # escaped, as on the page
    # A task that does not exist is an error: no card, the text says why.
    missing = results["toolset__workspace__get_task"]
    assert missing.is_error or 'data-component="task_card"' in missing.meta["tessera/card"]["html"]


def test_without_the_extension_nothing_changes(stack: Any, switched_on: None, token: str, workspace: None) -> None:
    async def work(client: Client) -> Any:
        tools = await client.list_tools()
        resources = await client.list_resources()
        app_only = await client.call_tool("tessera__approval_card", {"tool": "x"})
        return tools, resources, app_only

    tools, resources, app_only = run(stack.url, token, "auto", work)
    assert all(tool.meta is None for tool in tools.tools)
    assert "tessera__approval_card" not in {tool.name for tool in tools.tools}
    assert resources.resources == []
    assert app_only.is_error and "unknown_tool" in app_only.content[0].text


def test_the_approval_card_shows_what_waits_and_links_to_the_approval_page(
    stack: Any, switched_on: None, token: str, user: Any
) -> None:
    from core.redis_client import async_client
    from toolsets.policy import approval

    arguments = {"expression": "6 * 7"}
    waiting = approval.ApprovalRequest(
        toolset_id="clock_math",
        tool="calculate",
        name="toolset__clock_math__calculate",
        display_name="Clock & math: Calculate",
        arguments=arguments,
        timeout_s=300,
    )
    other_client = approval.ApprovalRequest(**{**waiting.__dict__, "id": "x" * 24})

    async def open_requests() -> None:
        redis = async_client()
        for request, client in ((waiting, "mcp: Test Desktop"), (other_client, "mcp: Other")):
            await approval.open_request(redis, request, chat_id=None, turn_id=None, user_id=user.pk, client=client)
        await redis.aclose()

    asyncio.run(open_requests())

    async def work(client: Client) -> Any:
        name, tool = "tessera__approval_card", "toolset__clock_math__calculate"
        found = await client.call_tool(name, {"tool": tool, "arguments": arguments})
        other = await client.call_tool(name, {"tool": tool, "arguments": {"expression": "1"}})
        bad = await client.call_tool(name, {"tool": 3})
        return found, other, bad

    found, other, bad = run(stack.url, token, "auto", work, extensions=APPS)
    html = found.meta["tessera/card"]["html"]
    assert "Clock &amp; math: Calculate" in html and "6 * 7" in html
    # The link is this request's own approval page (the other client's request is not shown).
    assert f'href="{stack.url}/approvals/{waiting.id}/review/"' in html
    assert other_client.id not in html
    # Another call's arguments wait for nothing; a malformed call is refused.
    assert "tessera/card" not in (other.meta or {}) and "No call" in other.content[0].text
    assert bad.is_error and "validation_error" in bad.content[0].text
