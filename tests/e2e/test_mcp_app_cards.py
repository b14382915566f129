"""Tessera's cards in another MCP host: a host page built from the official `app-bridge`
(tests/e2e/mcp_app_host/, bundled here, served from an origin of its own) reads a card's
`ui://tessera/…` resource and the tool's result through Tessera's `/mcp` (the official `mcp`
client, negotiating MCP Apps), renders the View in a sandboxed iframe, and shows the same card as
Tessera's own page for the same result: light and dark, with axe inside the View. The approval
card of an Ask tool shows what waits and links to Tessera's approval page, through the host."""

from __future__ import annotations

import asyncio
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from playwright.sync_api import Browser, Frame, Page, expect

from chat.models import AppSettings
from hub.models import ApiToken
from toolsets.models import ToolExecution, ToolRule

from .axe import AXE_JS, blocking, describe
from .conftest import browser_page, send, shot, wait_turn_done
from .test_components import set_up_workspace

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HOST = Path(__file__).resolve().parent / "mcp_app_host"
APPS = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]
CLIENT = types.Implementation(name="Card Host", version="1")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def host_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The test host, bundled from the lockfile's `@modelcontextprotocol/ext-apps`, on a port
    (an origin) of its own."""
    out = tmp_path_factory.mktemp("mcp-app-host")
    esbuild = ROOT / "node_modules" / ".bin" / "esbuild"
    bundle = [str(esbuild), str(HOST / "host.js"), "--bundle", "--format=iife", "--log-level=warning"]
    subprocess.run([*bundle, f"--outfile={out / 'host.bundle.js'}"], cwd=ROOT, check=True, timeout=120)
    shutil.copy(HOST / "host.html", out / "index.html")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def _mcp(stack: Any, token: str, work: Any, **options: Any) -> Any:
    """One session of the official client with MCP Apps declared, off the browser's thread."""

    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            transport = streamable_http_client(f"{stack.url}/mcp", http_client=http)
            async with Client(transport, client_info=CLIENT, extensions=APPS, **options) as client:  # type: ignore[arg-type]
                return await work(client)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result(timeout=180)


def _wire(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _card_of(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a host has for a call: the tool, its View's HTML (resources/read) and the result."""
    tool = next(tool for tool in (await client.list_tools()).tools if tool.name == name)
    result = await client.call_tool(name, arguments)
    return {"tool": _wire(tool), "html": await _html_of(client, tool), "input": arguments, "result": _wire(result)}


async def _html_of(client: Client, tool: types.Tool) -> str:
    """The View of the tool's card, read as a host reads it."""
    assert tool.meta is not None
    (content,) = (await client.read_resource(tool.meta["ui"]["resourceUri"])).contents
    assert isinstance(content, types.TextResourceContents) and content.mime_type == APP_MIME_TYPE
    return content.text


def _view(host: Page, slot: str) -> Frame:
    frame = host.locator(f'[data-testid="view-{slot}"]').element_handle().content_frame()
    assert frame is not None
    return frame


def _axe_in(frame: Frame, where: str) -> None:
    # Evaluated by the browser's tooling, not loaded by the View: its CSP stays as it is.
    frame.evaluate(AXE_JS.read_text())
    found = frame.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
            nodes: v.nodes.map((n) => ({target: n.target.map(String).join(" "), summary: n.failureSummary || ""})),
        }))"""
    )
    violations = blocking(found)
    assert not violations, describe(violations, where)


@pytest.fixture
def switched_on(stack: Any, e2e_user: Any) -> str:
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()
    return ApiToken.issue(e2e_user, "card host")[1]


def test_a_hosts_view_shows_the_same_task_table_as_tesseras_page(
    page: Page, browser: Browser, stack: Any, host_site: str, switched_on: str
) -> None:
    # Tessera's own page: the demo model lists the tasks and writes the task table.
    set_up_workspace(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "Summarize stale tasks across projects")
    on_page = page.locator(".gen-ui-task_table")
    expect(on_page).to_be_visible(timeout=30_000)
    wait_turn_done(page)
    shot(page, "mcp-app-task-table-on-the-page")
    arguments = ToolExecution.objects.get(tool="list_tasks").arguments

    # The same call through /mcp, as an MCP Apps host makes it.
    card = _mcp(stack, switched_on, lambda client: _card_of(client, "toolset__workspace__list_tasks", arguments))
    assert card["tool"]["_meta"]["ui"]["resourceUri"] == "ui://tessera/task-table"

    with browser_page(browser, host_site, signed_in=False) as host:
        host.goto(host_site + "/index.html")
        host.evaluate("(card) => renderCard(card)", {**card, "theme": "light", "slot": "light"})
        host.evaluate("(card) => renderCard(card)", {**card, "theme": "dark", "slot": "dark"})
        iframe = host.get_by_test_id("view-light")
        assert iframe.get_attribute("sandbox") == "allow-scripts"
        light, dark = _view(host, "light"), _view(host, "dark")
        in_view = light.locator(".gen-ui-task_table")
        expect(in_view).to_be_visible(timeout=15_000)
        expect(dark.locator(".gen-ui-task_table")).to_be_visible()
        # The same card, word for word, and the same rows.
        assert in_view.inner_text() == on_page.inner_text()
        assert in_view.locator("tbody tr").count() == on_page.locator("tbody tr").count() > 0
        # The Sources list under it, as under the page's answer.
        expect(light.locator(".sources .source").first).to_be_visible()
        # Tessera's light and dark colours, from the host's theme.
        surface = "(el) => getComputedStyle(el).backgroundColor"
        assert light.locator(".gu-card").first.evaluate(surface) == "rgb(255, 255, 255)"
        assert dark.locator(".gu-card").first.evaluate(surface) == "rgb(26, 26, 30)"
        # The View sized its frame to the card, and cannot reach the host's page.
        host.wait_for_function("() => document.querySelector('[data-testid=view-light]').offsetHeight > 150")
        blocked = "() => { try { return parent.document.title; } catch (e) { return 'blocked'; } }"
        assert light.evaluate(blocked) == "blocked"
        host.locator("#light").scroll_into_view_if_needed()
        shot(host, "mcp-app-task-table-in-a-host", full_page=True)
        _axe_in(light, "task table View, light")
        _axe_in(dark, "task table View, dark")
        # A theme change from the host reaches the View.
        host.evaluate("() => setTheme('light', 'dark')")
        expect(light.locator("html")).to_have_attribute("data-theme", "dark")


def test_the_approval_card_shows_what_waits_and_links_to_tesseras_approval_page(
    page: Page, browser: Browser, stack: Any, host_site: str, switched_on: str, e2e_user: Any
) -> None:
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="ask")
    name, arguments = "toolset__clock_math__calculate", {"expression": "6 * 7"}
    links: queue.Queue[str] = queue.Queue()
    outcome: dict[str, Any] = {}

    async def open_page(context: Any, params: Any) -> types.ElicitResult:
        links.put(params.url)  # the host opens Tessera's approval page for its user
        return types.ElicitResult(action="accept")

    def call() -> None:
        try:
            outcome["result"] = _mcp(
                stack, switched_on, lambda client: client.call_tool(name, arguments), elicitation_callback=open_page
            )
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc

    async def view_of_tool(client: Client) -> dict[str, Any]:
        tool = next(tool for tool in (await client.list_tools()).tools if tool.name == name)
        return {"tool": _wire(tool), "html": await _html_of(client, tool)}

    view = _mcp(stack, switched_on, view_of_tool)
    assert view["tool"]["_meta"] == {"ui": {"resourceUri": "ui://tessera/approval"}, "tessera/asks": True}
    waiting = threading.Thread(target=call, daemon=True)
    waiting.start()
    review_url = links.get(timeout=60)

    # What the View's own call (the app-only tool) gets from Tessera while the call waits.
    async def approval_card(client: Client) -> Any:
        return _wire(await client.call_tool("tessera__approval_card", {"tool": name, "arguments": arguments}))

    answer = _mcp(stack, switched_on, approval_card)
    with browser_page(browser, host_site, signed_in=False) as host:
        host.goto(host_site + "/index.html")
        host.evaluate(
            "(card) => renderCard(card)",
            {
                **view,
                "input": arguments,
                "result": None,
                "theme": "light",
                "slot": "approval",
                "serverCalls": {"tessera__approval_card": answer},
            },
        )
        frame = _view(host, "approval")
        expect(frame.get_by_test_id("approval-card-tool")).to_have_text("Clock & math: Calculate", timeout=15_000)
        expect(frame.get_by_test_id("approval-card-arguments")).to_contain_text('"expression": "6 * 7"')
        calls = host.evaluate("() => hostLog.calls")
        asked = {"tool": name, "arguments": arguments}
        assert (calls[0]["name"], calls[0]["arguments"]) == ("tessera__approval_card", asked)
        host.locator("#approval").scroll_into_view_if_needed()
        shot(host, "mcp-app-approval-card-in-a-host")
        _axe_in(frame, "approval card View")
        # Its link opens through the host: Tessera's approval page for this very call.
        frame.get_by_test_id("approval-card-link").click()
        host.wait_for_function("() => hostLog.links.length > 0")
        assert host.evaluate("() => hostLog.links[0]") == review_url

        # The owner approves there; the call runs and its result replaces the card.
        page.goto(review_url)
        expect(page.get_by_test_id("approval-page-tool")).to_have_text("Clock & math: Calculate")
        page.get_by_test_id("approval-page-approve").click()
        expect(page.get_by_test_id("approval-page-done")).to_contain_text("Approved.")
        waiting.join(60)
        assert "error" not in outcome, outcome.get("error")
        host.evaluate("(result) => sendResult('approval', result)", _wire(outcome["result"]))
        expect(frame.locator(".view-text")).to_contain_text("42")
        shot(host, "mcp-app-approval-card-answered")
    assert ToolExecution.objects.get(user=e2e_user, tool="calculate").approval == "approved"
