"""Every page and control a user reaches passes axe-core with no serious or critical violation,
in the light and the dark theme."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from .axe import axe_violations, blocking, describe, set_theme, split_known
from .conftest import login, send, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

THEMES = ("light", "dark")


# Violations that wait on a change outside this test's reach, each with the elements it may flag
# (none now: the tool cards' scrolling blocks are focusable).
KNOWN: dict[str, str] = {}


class Checker:
    """axe in both themes for each state of a page; a screenshot of each."""

    def __init__(self, page: Page, full_page: bool = False) -> None:
        self.page = page
        self.full_page = full_page  # the chat layout fills the window; the other pages scroll
        self.failures: list[str] = []
        self.known: list[str] = []

    def __call__(self, name: str, prepare: Callable[[], None] | None = None) -> None:
        for theme in THEMES:
            set_theme(self.page, theme)
            if prepare:
                prepare()
            new, known = split_known(self.page, blocking(axe_violations(self.page)), KNOWN)
            if new:
                self.failures.append(describe(new, f"{name}, {theme}"))
            if known:
                self.known.append(describe(known, f"{name}, {theme}"))
            shot(self.page, f"a11y-{name}-{theme}", full_page=self.full_page)

    def assert_clean(self) -> None:
        assert not self.failures, "axe found serious or critical violations:\n" + "\n".join(self.failures)


def set_up_workspace(page: Page) -> None:
    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    page.get_by_test_id("toolset-setup-workspace").click()
    expect(page.get_by_test_id("toolset-status-workspace")).to_have_text("Ready")


def test_login_page(axe_page: Page) -> None:
    check = Checker(axe_page, full_page=True)
    axe_page.goto(axe_page.base_url + "/login/")  # type: ignore[attr-defined]
    check("login")
    # A failed sign-in shows its error too.
    axe_page.fill("#id_username", "ada")
    axe_page.fill("#id_password", "not the password")
    axe_page.click("button[type=submit]")
    expect(axe_page.locator(".form-error")).to_be_visible()
    check("login-error")
    check.assert_clean()


def test_home_empty_state(axe_page: Page) -> None:
    check = Checker(axe_page)
    login(axe_page, axe_page.base_url)  # type: ignore[attr-defined]
    expect(axe_page.locator("#empty-state")).to_be_visible()
    check("home")
    check.assert_clean()


def test_toolsets_settings_page(axe_page: Page) -> None:
    check = Checker(axe_page, full_page=True)
    login(axe_page, axe_page.base_url)  # type: ignore[attr-defined]
    axe_page.goto(axe_page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    check("toolsets")
    axe_page.locator(".tsc-tools > summary").first.click()
    check("toolsets-tools-open")
    check.assert_clean()


def test_chat_with_tool_and_component_cards_settings_and_tools(axe_page: Page) -> None:
    page = axe_page
    check = Checker(page)
    login(page, page.base_url)  # type: ignore[attr-defined]
    set_up_workspace(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "What time is it in Tokyo, and what is 12*7?")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    send_and_wait(page, "Summarize stale tasks across projects", timeout=60_000)
    expect(page.locator(".gen-ui-task_table")).to_be_visible()
    assert page.get_by_test_id("tool-call-message").count() >= 2
    check("chat")

    def open_cards() -> None:
        page.evaluate("document.querySelectorAll('details.tool-card').forEach((d) => { d.open = true; })")

    check("chat-cards-open", open_cards)
    page.evaluate("document.querySelectorAll('details.tool-card').forEach((d) => { d.open = false; })")

    page.get_by_test_id("settings-trigger").click()
    expect(page.get_by_test_id("settings-panel")).to_be_visible()
    check("chat-settings")
    page.get_by_test_id("settings-trigger").click()
    expect(page.get_by_test_id("settings-panel")).to_be_hidden()

    page.get_by_test_id("toolsets-popover-trigger").click()
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_visible()
    page.get_by_test_id("toolset-expand-workspace").click()
    expect(page.locator("#tsp-tools-workspace")).to_be_visible()
    check("chat-tools")
    check.assert_clean()


def test_home_settings_panel_before_the_first_message(axe_page: Page) -> None:
    check = Checker(axe_page)
    login(axe_page, axe_page.base_url)  # type: ignore[attr-defined]
    axe_page.get_by_role("button", name="Chat settings").click()
    expect(axe_page.get_by_test_id("settings-panel")).to_be_visible()
    check("home-settings")
    check.assert_clean()


def test_message_actions_versions_edit_and_regenerate_menu(axe_page: Page) -> None:
    page = axe_page
    check = Checker(page)
    login(page, page.base_url)  # type: ignore[attr-defined]
    send(page, "[demo:slow] show me some code")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    first = page.locator(".msg-user").first
    first.get_by_role("button", name="Edit message").click()
    first.get_by_test_id("edit-input").fill("What is 12*7?")
    check("chat-edit-open")
    first.get_by_test_id("edit-send").click()
    expect(page.locator(".msg-user").first.get_by_test_id("version-label")).to_have_text("2 / 2")
    wait_turn_done(page)
    page.get_by_role("button", name="Previous version").click()
    expect(page.locator(".msg-user").first.get_by_test_id("version-label")).to_have_text("1 / 2")
    expect(page.locator("[data-code-block]").first).to_be_visible()
    check("chat-versions-code")
    page.get_by_role("button", name="Regenerate answer").click()
    expect(page.locator(".regen-menu")).to_be_visible()
    check("chat-regenerate-menu")
    check.assert_clean()
