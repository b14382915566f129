"""MCP Apps in the chat (docs/admin-guide/mcp-apps.md), with the real official example server from npm
(`@modelcontextprotocol/server-basic-vanillajs`, over stdio) and a hostile one of our own
(tests/toolsets/mcp/apps_server.py): the card shows the server's View, live and after a reload;
a click in the View calls the server's tool through Tessera (audited); a message from the View
lands in the chat as the user's; and a View trying what it must not is refused every time, the
page staying responsive."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, FrameLocator, Page, expect

from chat.models import Chat, ChatShare
from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register, seen_by_stack
from toolsets.models import ToolExecution, ToolsetConfig

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import browser_page, send, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BASIC = ROOT / "node_modules" / ".bin" / "mcp-server-basic-vanillajs"
APPS_SERVER = ROOT / "tests" / "toolsets" / "mcp" / "apps_server.py"
# What a hostile View's refused attempts print in the console (the browser's own reports).
REFUSALS = (
    *("Refused to", "Connecting to", "Fetch API cannot load"),
    *("Blocked", "Unsafe attempt", "Failed to load resource"),
)


def _register(**fields: Any) -> Any:
    # Off Playwright's thread, which runs its own event loop.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(register, **fields).result()


def _chat_with(page: Page, base_url: str, *toolsets: str) -> None:
    page.goto(base_url + "/")
    send(page, "Hello")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    page.get_by_test_id("toolsets-popover-trigger").click()
    for toolset in toolsets:
        box = page.get_by_test_id(f"toolset-checkbox-{toolset}")
        if not box.is_checked():
            box.check()
        expect(box).to_be_checked()
    page.keyboard.press("Escape")


def _view(page: Page, index: int = 0) -> FrameLocator:
    """The View: the inner frame of the card's sandbox proxy."""
    return page.frame_locator("[data-testid=mcp-app-frame]").nth(index).frame_locator("iframe")


def _wait_for(predicate: Any, what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(what)


@pytest.fixture
def basic_server(stack: Any, transactional_db: Any) -> Any:
    server = _register(name="Basic", slug="basic", transport="stdio", command=str(BASIC), args=["--stdio"])
    # The admin lets its tool run without asking (the server's annotations are not trusted).
    ToolsetConfig.objects.create(toolset_id="mcp_basic", policy="auto")
    seen_by_stack()
    return server


@pytest.fixture
def hostile_server(stack: Any, transactional_db: Any) -> Any:
    server = _register(name="Hostile", slug="hostile", transport="stdio", **forked(APPS_SERVER))
    ToolsetConfig.objects.create(toolset_id="mcp_hostile", policy="auto")
    seen_by_stack()
    return server


@pytest.fixture
def page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    # The example View logs a refused request (a shared page's) as an error of its own.
    with browser_page(browser, stack.url, allow_console=("ProtocolError: This is a shared page",)) as found:
        yield found


@pytest.fixture
def hostile_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, allow_console=REFUSALS) as found:
        yield found


def test_the_official_example_app_runs_in_its_card_and_calls_its_server_through_tessera(
    page: Page, stack: Any, basic_server: Any, e2e_user: Any
) -> None:
    _chat_with(page, stack.url, "mcp_basic")
    send(page, "use the get-time tool")
    expect(page.locator(".tool-card.is-success")).to_have_count(1, timeout=30_000)
    card = page.locator(".tool-card.is-success")

    expect(card.get_by_test_id("mcp-app")).to_be_visible()
    view = _view(page)
    # The call's result was pushed to the View: it shows the server's time, not "Loading...".
    time_text = view.locator("#server-time")
    expect(time_text).not_to_have_text("Loading...", timeout=20_000)
    first = time_text.inner_text()
    assert first[:2] == "20", first
    wait_turn_done(page)
    shot(page, "mcp-app-card-light")

    # A click in the View calls the server's tool through Tessera: a new, audited execution.
    view.get_by_role("button", name="Get Server Time").click()
    record = _wait_for(
        lambda: ToolExecution.objects.filter(user=e2e_user, client="mcp-app: Basic", status="success").first(),
        "the View's call was not run by Tessera",
    )
    assert (record.toolset, record.tool) == ("mcp_basic", "get-time")
    expect(time_text).not_to_have_text(first, timeout=10_000)

    # "Open Link" asks in Tessera's own dialog first; cancelled, nothing opens.
    view.get_by_role("button", name="Open Link").click()
    dialog = page.get_by_test_id("mcp-app-confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("https://modelcontextprotocol.io/")
    shot(page, "mcp-app-confirm-link")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert len(page.context.pages) == 1

    # A message from the View is sent as the user would send it, and shows as theirs.
    view.locator("#message-text").fill("Hello from the app")
    view.get_by_role("button", name="Send Message").click()
    expect(page.locator(".msg-user").last).to_contain_text("Hello from the app", timeout=10_000)
    wait_turn_done(page)

    # After a reload: the same View, with the same result.
    page.reload()
    wait_socket(page)
    expect(_view(page).locator("#server-time")).to_have_text(first, timeout=20_000)
    set_theme(page, "dark")
    page.locator("[data-testid=mcp-app]").scroll_into_view_if_needed()
    # The View follows the theme (host-context-changed): its page turns dark too.
    expect(_view(page).locator("html")).to_have_attribute("data-theme", "dark", timeout=10_000)
    shot(page, "mcp-app-card-dark")

    # On a shared page: the same View with the shown result, display-only.
    chat = Chat.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    turns = list(chat.turns.order_by("id").values_list("id", flat=True))
    share = ChatShare.objects.create(chat=chat, token=secrets.token_urlsafe(24), title="Shared", turn_ids=turns)
    calls = ToolExecution.objects.count()
    page.goto(f"{stack.url}/s/{share.token}/")
    shared = _view(page)
    expect(shared.locator("#server-time")).to_have_text(first, timeout=20_000)
    shared.get_by_role("button", name="Get Server Time").click()
    expect(shared.locator("#server-time")).to_have_text("[ERROR]")  # the View shows the refusal
    assert ToolExecution.objects.count() == calls
    shot(page, "mcp-app-shared")


def test_the_app_card_in_dark_on_a_phone_and_for_axe(
    browser: Browser, stack: Any, basic_server: Any, e2e_user: Any
) -> None:
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        _chat_with(page, stack.url, "mcp_basic")
        send(page, "use the get-time tool")
        expect(page.locator(".tool-card.is-success")).to_have_count(1, timeout=30_000)
        expect(_view(page).locator("#server-time")).not_to_have_text("Loading...", timeout=20_000)
        wait_turn_done(page)
        for theme in ("light", "dark"):
            set_theme(page, theme)
            violations = blocking(axe_violations(page, "[data-testid=mcp-app]"))
            assert not violations, describe(violations, f"app card, {theme}")
        chat_url = page.url
    with browser_page(
        browser, stack.url, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    ) as phone:
        phone.goto(chat_url)
        wait_socket(phone)
        expect(_view(phone).locator("#server-time")).not_to_have_text("Loading...", timeout=20_000)
        phone.locator("[data-testid=mcp-app]").scroll_into_view_if_needed()
        shot(phone, "mcp-app-card-phone")
        # Full screen on request, and back.
        phone.get_by_role("button", name="Full screen").click()
        expect(phone.locator(".tc-app.is-fullscreen")).to_be_visible()
        shot(phone, "mcp-app-fullscreen-phone")
        phone.get_by_role("button", name="Exit full screen").click()
        expect(phone.locator(".tc-app.is-fullscreen")).to_have_count(0)


@pytest.mark.timeout(240)  # a dozen steps, each given its time on a loaded machine
def test_a_hostile_view_is_refused_everything_and_the_page_stays_responsive(
    hostile_page: Page, stack: Any, hostile_server: Any, basic_server: Any, e2e_user: Any
) -> None:
    page = hostile_page
    page.context.add_cookies([{"name": "probe", "value": "secret", "url": stack.url}])
    _chat_with(page, stack.url, "mcp_hostile", "mcp_basic")
    send(page, "use the show tool")
    expect(page.locator(".tool-card.is-success")).to_have_count(1, timeout=30_000)
    view = _view(page)
    report = view.locator("#report")
    expect(report).to_contain_text("initialized: Tessera", timeout=20_000)
    expect(report).to_contain_text("fetch-undeclared: blocked", timeout=10_000)
    expect(report).to_contain_text("fetch-tessera: blocked", timeout=10_000)
    text = report.inner_text()
    for attempt in ("cookie", "storage", "parent-dom", "top-dom", "top-cookie", "popup", "top-navigation"):
        assert f"{attempt}: blocked" in text, text
    assert "secret" not in text
    assert page.url.startswith(stack.url) and len(page.context.pages) == 1
    assert not ToolExecution.objects.filter(client__startswith="mcp-app").exists()

    # Its own server's app-only tool: run through Tessera and audited.
    view.get_by_role("button", name="Call my tool").click()
    expect(report).to_contain_text('call-own: [{"type":"text","text":"app-only ran"}]', timeout=10_000)
    assert ToolExecution.objects.filter(client="mcp-app: Hostile", tool="app_secret", status="success").count() == 1
    # Another server's tool, and a tool its server keeps for the model: refused, never run.
    view.get_by_role("button", name="Call another server's tool").click()
    expect(report).to_contain_text("call-other: error Hostile has no tool named 'get-time'", timeout=10_000)
    view.get_by_role("button", name="Call a model-only tool").click()
    expect(report).to_contain_text("call-model-only: error Hostile's Model only may not be called", timeout=10_000)
    assert not ToolExecution.objects.filter(tool__in=["get-time", "model_only"]).exists()
    shot(page, "mcp-app-hostile")

    # A flood: dropped, the View stopped, and the page still answers at once. Past 50 messages a
    # second each one is dropped, and the 500th dropped stops the View: on a machine the rest of
    # the suite keeps busy the messages cross three frames slowly, so that can take a while.
    view.get_by_role("button", name="Flood").click()
    expect(page.locator("[data-testid=mcp-app]")).to_contain_text("sent too many messages", timeout=60_000)
    started = time.monotonic()
    page.get_by_test_id("composer-input").fill("still here")
    assert page.get_by_test_id("composer-input").input_value() == "still here"
    assert time.monotonic() - started < 2
    assert ToolExecution.objects.filter(client="mcp-app: Hostile").count() <= 61  # the rate limit, at most
    # Stopped for good: the page changing around it (here a message sent, its answer streamed
    # in) starts no new View in its place, which would only flood again.
    box = page.get_by_test_id("mcp-app")
    send_and_wait(page, "still here")
    expect(box).to_contain_text("sent too many messages")
    expect(box.get_by_test_id("mcp-app-frame")).to_have_count(0)
    assert box.get_by_role("button", name="Full screen").is_hidden()
    box.scroll_into_view_if_needed()
    shot(page, "mcp-app-flood-stopped")


def test_a_view_sees_its_call_as_the_model_writes_it_and_why_it_ended_each_server_on_its_own_origin(
    hostile_page: Page, stack: Any, hostile_server: Any, basic_server: Any, e2e_user: Any
) -> None:
    page = hostile_page
    _chat_with(page, stack.url, "mcp_hostile", "mcp_basic")
    send(page, 'use the show tool with {"text": "written bit by bit for the view"} and use the get-time tool')
    expect(page.locator(".tool-card.is-success")).to_have_count(2, timeout=30_000)
    report = _view(page, 0).locator("#report")
    # The arguments while the model wrote them, then whole, then the result.
    expect(report).to_contain_text('tool-input: {"text":"written bit by bit for the view"}', timeout=20_000)
    expect(report).to_contain_text('tool-result: [{"type":"text","text":"shown: written bit by bit', timeout=10_000)
    text = report.inner_text()
    # Partial input only reaches a View that is ready before the model has finished writing.
    if "tool-input-partial: " in text:
        assert text.index("tool-input-partial: ") < text.index("tool-input: ")
    wait_turn_done(page)
    # Two servers, two sandbox origins: their Views share no storage and no cookies.
    origins = {f.url.split("/app-sandbox/")[0] for f in page.frames if "/app-sandbox/" in f.url}
    assert len(origins) == 2 and all(o.endswith(".localhost:" + stack.url.rsplit(":", 1)[1]) for o in origins)

    # A call the user denies: its View is told it was cancelled, and why; after a reload too.
    ToolsetConfig.objects.filter(toolset_id="mcp_hostile").update(policy="ask")
    send(page, 'use the show tool with {"text": "denied"}')
    page.get_by_test_id("approval-deny").click()
    wait_turn_done(page)
    denied = _view(page, 2).locator("#report")
    expect(denied).to_contain_text("tool-cancelled: ", timeout=20_000)
    expect(denied).to_contain_text('tool-input: {"text":"denied"}')
    # The card says it was denied; nothing offers to set the toolset up.
    denied_card = page.locator(".tool-card.is-error")
    expect(denied_card.locator(".tc-error")).to_contain_text("The user denied this call")
    expect(denied_card.get_by_test_id("tool-call-connect")).to_have_count(0)
    shot(page, "mcp-app-cancelled")
    page.reload()
    wait_socket(page)
    expect(_view(page, 2).locator("#report")).to_contain_text("tool-cancelled: ", timeout=20_000)
    assert "tool-result" not in _view(page, 2).locator("#report").inner_text()


def test_a_page_too_large_to_keep_is_refused_at_once_and_its_card_says_why(
    hostile_page: Page, stack: Any, e2e_user: Any, transactional_db: Any
) -> None:
    started = time.monotonic()
    _register(
        name="Huge",
        slug="huge",
        transport="stdio",
        **forked(APPS_SERVER),
        env='{"APPS_HUGE": "1"}',
        timeout_s=30,
    )
    # Refused by its size as it streamed, not by the clock (the server's 30 s timeout).
    assert time.monotonic() - started < 25
    ToolsetConfig.objects.create(toolset_id="mcp_huge", policy="auto")
    seen_by_stack()
    page = hostile_page
    _chat_with(page, stack.url, "mcp_huge")
    send(page, "use the huge tool")
    card = page.locator(".tool-card.is-success")
    expect(card).to_have_count(1, timeout=30_000)
    expect(card.get_by_test_id("mcp-app-refused")).to_be_visible()
    expect(card.get_by_test_id("mcp-app-refused")).to_contain_text("larger than 5 MB")
    expect(card.get_by_test_id("tool-call-content")).to_contain_text("huge")
    wait_turn_done(page)
    card.get_by_test_id("mcp-app-refused").scroll_into_view_if_needed()
    shot(page, "mcp-app-refused")
    page.get_by_test_id("composer-input").fill("still here")
    assert page.get_by_test_id("composer-input").input_value() == "still here"
