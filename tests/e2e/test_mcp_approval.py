"""An MCP client that can open links but shows no forms asks its user to approve an ask tool:
the user approves on Tessera's approval page in a real browser, and the client's call runs.
Light, dark and phone screenshots of the page; axe finds nothing serious on it."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Page, expect

from chat.models import AppSettings
from toolsets.models import ApiToken, ToolExecution, ToolRule

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import shot


@pytest.fixture
def page(axe_signed_in: Page) -> Page:
    return axe_signed_in


@pytest.fixture
def asking_client(stack: Any, e2e_user: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Starts a call of an ask tool from an MCP client in the background; gives the link the
    client was asked to open, and the call's outcome when it ends."""
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")
    token = ApiToken.issue(e2e_user, "desktop")[1]
    build = ClientSession._build_capabilities

    def url_only(self: Any, version: str) -> types.ClientCapabilities:
        found = build(self, version)
        found.elicitation = types.ElicitationCapability(url=types.UrlElicitationCapability())
        return found

    monkeypatch.setattr(ClientSession, "_build_capabilities", url_only)
    links: queue.Queue[str] = queue.Queue()
    outcome: dict[str, Any] = {}

    async def open_link(context: Any, params: Any) -> types.ElicitResult:
        links.put(params.url)  # the user's browser opens it
        return types.ElicitResult(action="accept")

    async def call() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
            client_info = types.Implementation(name="Claude Desktop", version="1")
            async with Client(transport, client_info=client_info, elicitation_callback=open_link) as client:  # type: ignore[arg-type]
                return await client.call_tool("toolset__clock_math__calculate", {"expression": "6 * 7"})

    def run() -> None:
        try:
            outcome["result"] = asyncio.run(call())
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return links, outcome, thread


def test_the_user_approves_an_mcp_clients_call_in_the_browser(page: Page, asking_client: Any, e2e_user: Any) -> None:
    links, outcome, thread = asking_client
    url = links.get(timeout=60)
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
    assert not result.is_error and "42" in result.content[0].text
    record = ToolExecution.objects.get(user=e2e_user, tool="calculate")
    assert (record.approval, record.status, record.client) == ("approved", "success", "mcp: Claude Desktop")


def test_a_denial_on_the_page_reaches_the_client_with_its_reason(page: Page, asking_client: Any, e2e_user: Any) -> None:
    links, outcome, thread = asking_client
    page.goto(links.get(timeout=60))
    page.get_by_test_id("approval-page-reason").fill("Not on a Friday")
    page.get_by_test_id("approval-page-deny").click()
    expect(page.get_by_test_id("approval-page-done")).to_contain_text("Denied.")
    thread.join(60)
    result = outcome["result"]
    assert result.is_error and "Not on a Friday" in result.content[0].text
    assert ToolExecution.objects.get(user=e2e_user, tool="calculate").approval == "denied"
