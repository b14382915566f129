"""An MCP client whose token may not approve calls an ask tool: it is sent to Tessera's approval
page (never shown a form it could tick itself), the owner approves there in a real browser, and
only then does the call run.
Light, dark and phone screenshots of the page; axe finds nothing serious on it."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page, expect

from chat.models import AppSettings
from hub.models import ApiToken
from tests.hub.mcp_client import oauth_token
from toolsets.models import ToolExecution, ToolRule

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import shot


@pytest.fixture
def page(axe_signed_in: Page) -> Page:
    return axe_signed_in


@pytest.fixture(params=["api token", "oauth client"])
def asking_client(request: Any, stack: Any, e2e_user: Any) -> Any:
    """Starts a call of an ask tool in the background from a caller that may not approve (an API
    token without *May approve*, an OAuth client granted only `mcp:tools`), through the official
    client, which declares both form and URL elicitation and would tick any form's box itself.
    Gives the link the client was asked to open, the forms it was shown (none may be), and the
    call's outcome when it ends."""
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")
    if request.param == "api token":
        token = ApiToken.issue(e2e_user, "desktop")[1]
    else:
        token = oauth_token(e2e_user, stack.url, name="Claude Desktop", scope="mcp:tools")[0]
    links: queue.Queue[str] = queue.Queue()
    forms: list[Any] = []
    outcome: dict[str, Any] = {}

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        if params.mode == "form":
            forms.append(params)  # a client approving itself: must never be asked
            return types.ElicitResult(action="accept", content={"approve": True})
        links.put(params.url)  # the user's browser opens it
        return types.ElicitResult(action="accept")

    async def call() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
            client_info = types.Implementation(name="Claude Desktop", version="1")
            async with Client(transport, client_info=client_info, elicitation_callback=answer) as client:  # type: ignore[arg-type]
                return await client.call_tool("toolset__clock_math__calculate", {"expression": "6 * 7"})

    def run() -> None:
        try:
            outcome["result"] = asyncio.run(call())
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return links, forms, outcome, thread


def test_the_user_approves_an_mcp_clients_call_in_the_browser(page: Page, asking_client: Any, e2e_user: Any) -> None:
    links, forms, outcome, thread = asking_client
    url = links.get(timeout=60)
    # Sent to the page, never shown a form; nothing runs until the owner answers there.
    time.sleep(1)
    assert forms == [] and thread.is_alive()
    assert not ToolExecution.objects.filter(user=e2e_user, tool="calculate").exists()
    page.goto(url)
    expect(page.get_by_role("heading", name="Approve a tool call")).to_be_visible()
    expect(page.get_by_test_id("approval-page-client")).to_have_text("Claude Desktop")
    expect(page.get_by_test_id("approval-page-tool")).to_have_text("Clock & math: Calculate")
    expect(page.get_by_test_id("approval-page-arguments")).to_contain_text('"expression": "6 * 7"')
    shot(page, "mcp-approval-page-light")
    violations = blocking(axe_violations(page))
    assert not violations, describe(violations, "approval page, light")
    set_theme(page, "dark")
    shot(page, "mcp-approval-page-dark")
    violations = blocking(axe_violations(page))
    assert not violations, describe(violations, "approval page, dark")
    page.set_viewport_size({"width": 390, "height": 800})
    shot(page, "mcp-approval-page-phone")
    page.get_by_test_id("approval-page-approve").click()
    expect(page.get_by_test_id("approval-page-done")).to_contain_text("Approved.")
    shot(page, "mcp-approval-page-done")
    thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert not result.is_error and "42" in result.content[0].text and forms == []
    record = ToolExecution.objects.get(user=e2e_user, tool="calculate")
    assert (record.approval, record.status, record.client) == ("approved", "success", "mcp: Claude Desktop")


def test_a_denial_on_the_page_reaches_the_client_with_its_reason(page: Page, asking_client: Any, e2e_user: Any) -> None:
    links, forms, outcome, thread = asking_client
    page.goto(links.get(timeout=60))
    page.get_by_test_id("approval-page-reason").fill("Not on a Friday")
    page.get_by_test_id("approval-page-deny").click()
    expect(page.get_by_test_id("approval-page-done")).to_contain_text("Denied.")
    thread.join(60)
    result = outcome["result"]
    assert result.is_error and "Not on a Friday" in result.content[0].text and forms == []
    assert ToolExecution.objects.get(user=e2e_user, tool="calculate").approval == "denied"
