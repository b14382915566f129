"""What an MCP App's View asks of the user, asked in the chat (docs/admin-guide/mcp-apps.md), with
the hostile test server (tests/toolsets/mcp/apps_server.py): an "ask" tool it calls waits for the
chat's own approval card under the View (chat/app_asking.py), denied or approved there, the View
told which, the call recorded with the card's turn; a message it sends is shown on its card first
where the admin asks for that (static/js/mcp_apps/message.js), and sent only on the user's word."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import seen_by_stack
from toolsets.mcp.models import MCPServer
from toolsets.models import ToolExecution, ToolRule, ToolsetConfig

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import browser_page, send, shot, wait_socket, wait_turn_done
from .test_mcp_apps import APPS_SERVER, REFUSALS, _chat_with, _register, _view, _wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def hostile_server(stack: Any, transactional_db: Any) -> Any:
    server = _register(name="Hostile", slug="hostile", transport="stdio", **forked(APPS_SERVER))
    ToolsetConfig.objects.create(toolset_id="mcp_hostile", policy="auto")
    # The admin wants the user's word on each call of the View's own tool.
    ToolRule.objects.create(toolset_id="mcp_hostile", tool="app_secret", policy="ask")
    seen_by_stack()
    return server


@pytest.fixture
def page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    # bypass_csp: axe is an injected script; the page's own scripts are what they always are.
    with browser_page(browser, stack.url, bypass_csp=True, allow_console=REFUSALS) as found:
        yield found


def test_an_ask_tool_a_view_calls_is_approved_or_denied_on_the_chat_s_card(
    page: Page, stack: Any, hostile_server: Any, e2e_user: Any
) -> None:
    _chat_with(page, stack.url, "mcp_hostile")
    send(page, "use the show tool")
    card = page.locator(".tool-card.is-success")
    expect(card).to_have_count(1, timeout=30_000)
    report = _view(page).locator("#report")
    expect(report).to_contain_text("initialized: Tessera", timeout=20_000)
    wait_turn_done(page)

    # Denied on the card under the View: the View is told it was denied, and nothing offers to
    # set anything up.
    _view(page).get_by_role("button", name="Call my tool").click()
    asked = card.get_by_test_id("mcp-app-ask")
    expect(asked).to_be_visible(timeout=20_000)
    expect(asked).to_contain_text("The app from Hostile asks to run a tool")
    expect(asked.get_by_test_id("approval-card")).to_contain_text("Hostile: App secret")
    assert not page.get_by_test_id("mcp-app-confirm").count()  # no modal: the chat's own card
    asked.scroll_into_view_if_needed()
    shot(page, "mcp-app-ask")
    for theme in ("light", "dark"):
        set_theme(page, theme)
        violations = blocking(axe_violations(page, "[data-testid=mcp-app-asks]"))
        assert not violations, describe(violations, f"app's approval card, {theme}")
    set_theme(page, "light")
    asked.get_by_test_id("approval-reason").fill("not now")
    asked.get_by_test_id("approval-deny").click()
    done = card.get_by_test_id("mcp-app-ask-done")
    expect(done).to_contain_text("Denied: the call did not run", timeout=20_000)
    expect(report).to_contain_text("call-own: ", timeout=20_000)
    expect(report).to_contain_text("The user denied this call; it did not run. Their reason: not now")
    expect(page.get_by_test_id("tool-call-connect")).to_have_count(0)
    assert "Connect" not in card.inner_text()
    shot(page, "mcp-app-ask-denied")
    denied = ToolExecution.objects.get(client="mcp-app: Hostile", tool="app_secret")
    assert (denied.approval, denied.error_type) == ("denied", "permission_denied")

    # Approved: the call runs, the View gets its result, the audit links it to the card's turn.
    _view(page).get_by_role("button", name="Call my tool").click()
    again = card.get_by_test_id("mcp-app-ask")
    expect(again).to_be_visible(timeout=20_000)
    again.get_by_test_id("approval-approve").click()
    expect(report).to_contain_text('call-own: [{"type":"text","text":"app-only ran"}]', timeout=20_000)
    expect(card.get_by_test_id("mcp-app-ask-done").last).to_contain_text("Approved")
    ran = ToolExecution.objects.get(client="mcp-app: Hostile", tool="app_secret", status="success")
    shown = ToolExecution.objects.get(tool="show")
    assert ran.approval == "approved" and ran.turn_id == shown.turn_id is not None
    shot(page, "mcp-app-ask-approved")

    # Leaving the page withdraws a question still open: the call never runs.
    _view(page).get_by_role("button", name="Call my tool").click()
    expect(card.get_by_test_id("mcp-app-ask")).to_be_visible(timeout=20_000)
    page.reload()
    wait_socket(page)
    withdrawn = _wait_for(
        lambda: ToolExecution.objects.filter(client="mcp-app: Hostile", status="cancelled").first(),
        "the question of a page that went away was not withdrawn",
        timeout=30,
    )
    assert withdrawn.tool == "app_secret" and withdrawn.result is None
    assert ToolExecution.objects.filter(client="mcp-app: Hostile", status="success").count() == 1


def test_a_view_s_message_waits_for_the_user_where_the_admin_says_so(
    page: Page, stack: Any, hostile_server: Any, e2e_user: Any
) -> None:
    MCPServer.objects.filter(slug="hostile").update(apps_confirm_messages=True)
    _chat_with(page, stack.url, "mcp_hostile")
    send(page, "use the show tool")
    card = page.locator(".tool-card.is-success")
    expect(card).to_have_count(1, timeout=30_000)
    report = _view(page).locator("#report")
    expect(report).to_contain_text("initialized: Tessera", timeout=20_000)
    wait_turn_done(page)
    users = page.locator(".msg-user")
    before = users.count()

    _view(page).get_by_role("button", name="Send a message").click()
    confirm = card.get_by_test_id("mcp-app-message")
    expect(confirm).to_be_visible(timeout=10_000)
    expect(confirm).to_contain_text("The app from Hostile wants to send this message as you:")
    expect(confirm).to_contain_text("Hello from the hostile app")
    confirm.scroll_into_view_if_needed()
    shot(page, "mcp-app-message-confirm")
    for theme in ("light", "dark"):
        set_theme(page, theme)
        violations = blocking(axe_violations(page, "[data-testid=mcp-app-asks]"))
        assert not violations, describe(violations, f"app's message card, {theme}")
    set_theme(page, "light")
    confirm.get_by_test_id("mcp-app-message-discard").click()
    expect(report).to_contain_text("message: not sent", timeout=10_000)
    expect(confirm).to_contain_text("Discarded")
    assert users.count() == before

    _view(page).get_by_role("button", name="Send a message").click()
    second = card.get_by_test_id("mcp-app-message").last
    second.get_by_test_id("mcp-app-message-send").click()
    expect(report).to_contain_text("message: sent", timeout=10_000)
    expect(users.last).to_contain_text("Hello from the hostile app", timeout=10_000)
    expect(users).to_have_count(before + 1)
    wait_turn_done(page)

    # Off (the default): sent at once, as the user's, without a card.
    MCPServer.objects.filter(slug="hostile").update(apps_confirm_messages=False)
    page.reload()
    wait_socket(page)
    expect(_view(page).locator("#report")).to_contain_text("initialized: Tessera", timeout=20_000)
    _view(page).get_by_role("button", name="Send a message").click()
    expect(users).to_have_count(before + 2, timeout=10_000)
    expect(page.get_by_test_id("mcp-app-message")).to_have_count(0)
    wait_turn_done(page)
