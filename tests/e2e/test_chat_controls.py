"""Chat controls: the toolsets popover, per-tool selection and the chat settings panel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from chat.models import Chat
from toolsets.exa.fake_server import FAKE_API_KEY, FakeExa
from toolsets.models import ToolExecution, ToolsetConfig, UserToolsetConfig

from .conftest import send, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e


def open_chat(page: Page) -> None:
    """A chat page with an open socket (created by sending a first message)."""
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "What is 1+1?")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)


def open_popover(page: Page) -> None:
    page.get_by_test_id("toolsets-popover-trigger").click()
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_visible()


@pytest.fixture
def exa_configured(e2e_user: Any) -> Iterator[FakeExa]:
    with FakeExa() as exa:
        ToolsetConfig.objects.update_or_create(toolset_id="exa", defaults={"settings": {"base_url": exa.base_url}})
        UserToolsetConfig.objects.create(user=e2e_user, toolset_id="exa", api_key=FAKE_API_KEY)
        yield exa


def test_trigger_is_in_the_composer(page: Page) -> None:
    open_chat(page)
    trigger = page.locator(".composer").get_by_test_id("toolsets-popover-trigger")
    expect(trigger).to_be_visible()


def test_popover_opens_and_lists_toolsets_including_exa(page: Page) -> None:
    open_chat(page)
    open_popover(page)
    for toolset_id in ("clock_math", "exa", "web", "workspace"):
        expect(page.get_by_test_id(f"toolset-row-{toolset_id}")).to_be_visible()
    expect(page.get_by_test_id("toolset-row-exa")).to_contain_text("Exa web search")


def test_unconfigured_toolset_is_disabled_with_reason(page: Page) -> None:
    open_chat(page)
    open_popover(page)
    expect(page.get_by_test_id("toolset-checkbox-exa")).to_be_disabled()
    row = page.get_by_test_id("toolset-row-exa")
    expect(row).to_have_attribute("title", "API key not configured")
    row.hover()
    expect(page.get_by_test_id("toolset-reason-exa")).to_contain_text("API key not configured")
    expect(page.get_by_test_id("toolset-reason-exa").get_by_role("link")).to_have_attribute(
        "href", "/toolsets/#toolset-exa"
    )
    page.get_by_test_id("toolset-expand-exa").click()
    expect(page.get_by_test_id("tool-checkbox-exa-search")).to_be_disabled()


def test_max_iterations_setting_is_visible_and_persists(page: Page) -> None:
    open_chat(page)
    page.get_by_test_id("settings-trigger").click()
    field = page.get_by_test_id("max-tool-iterations-input")
    expect(field).to_be_visible()
    expect(field).to_have_value("5")
    field.fill("3")
    field.press("Tab")
    expect(page.locator(".sp-saved")).to_have_text("Saved")
    page.reload()
    page.get_by_test_id("settings-trigger").click()
    expect(page.get_by_test_id("max-tool-iterations-input")).to_have_value("3")
    assert Chat.objects.get().max_tool_iterations == 3
    page.get_by_test_id("max-tool-iterations-switch").locator("xpath=..").click()
    expect(page.get_by_test_id("max-tool-iterations-input")).to_be_disabled()
    page.reload()
    page.get_by_test_id("settings-trigger").click()
    expect(page.get_by_test_id("max-tool-iterations-switch")).not_to_be_checked()


def test_selection_persists_across_close_reopen_and_reload(page: Page) -> None:
    open_chat(page)
    open_popover(page)
    page.get_by_test_id("toolset-expand-clock_math").click()
    page.get_by_test_id("tool-checkbox-clock_math-calculate").uncheck()
    expect(page.get_by_test_id("toolset-row-clock_math")).to_contain_text("(1/2)")
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_hidden()
    open_popover(page)
    expect(page.get_by_test_id("tool-checkbox-clock_math-calculate")).not_to_be_checked()
    page.reload()
    open_popover(page)
    page.get_by_test_id("toolset-expand-clock_math").click()
    expect(page.get_by_test_id("tool-checkbox-clock_math-calculate")).not_to_be_checked()
    expect(page.get_by_test_id("tool-checkbox-clock_math-current_time")).to_be_checked()
    assert Chat.objects.get().enabled_tools["clock_math"] == ["current_time"]


def test_tri_state_and_clicking_mixed_enables_all(page: Page) -> None:
    open_chat(page)
    open_popover(page)
    page.get_by_test_id("toolset-expand-clock_math").click()
    page.get_by_test_id("tool-checkbox-clock_math-calculate").uncheck()
    box = page.get_by_test_id("toolset-checkbox-clock_math")
    expect(box).to_have_attribute("aria-checked", "mixed")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=toolset-checkbox-clock_math]').indeterminate", timeout=2_000
    )
    box.click()
    expect(box).to_have_attribute("aria-checked", "true")
    expect(page.get_by_test_id("tool-checkbox-clock_math-calculate")).to_be_checked()
    box.click()
    expect(box).to_have_attribute("aria-checked", "false")
    expect(page.get_by_test_id("tool-checkbox-clock_math-current_time")).not_to_be_checked()


def test_keyboard_opens_moves_and_closes(page: Page) -> None:
    open_chat(page)
    trigger = page.get_by_test_id("toolsets-popover-trigger")
    trigger.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_hidden()
    trigger.focus()
    page.keyboard.press("Space")
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_visible()
    focused = []
    for _ in range(4):
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.dataset.testid || document.activeElement.tagName"))
    assert any(f.startswith("toolset-checkbox-") for f in focused)
    assert any(f.startswith("toolset-expand-") for f in focused)


def test_badge_counts_enabled_tools(page: Page, exa_configured: FakeExa) -> None:
    open_chat(page)
    open_popover(page)
    # Workspace needs its sample data first, so it is not counted; switch the others off.
    expect(page.get_by_test_id("toolset-checkbox-workspace")).to_be_disabled()
    for toolset_id in ("clock_math", "web", "files", "knowledge", "memory", "artifacts"):
        page.get_by_test_id(f"toolset-checkbox-{toolset_id}").uncheck()
    # The agents' box covers the agents that can be used (the Workspace assistant cannot yet).
    page.get_by_test_id("toolset-checkbox-agents").uncheck()
    page.get_by_test_id("toolset-expand-agents").click()
    for agent in ("researcher", "general"):
        expect(page.get_by_test_id(f"tool-checkbox-agents-{agent}")).not_to_be_checked()
    expect(page.get_by_test_id("toolsets-badge")).to_be_hidden()
    page.get_by_test_id("toolset-checkbox-exa").check()
    expect(page.get_by_test_id("toolsets-badge")).to_have_text("4")
    page.reload()
    expect(page.get_by_test_id("toolsets-badge")).to_have_text("4")


def test_new_chat_inherits_last_selection(page: Page) -> None:
    open_chat(page)
    open_popover(page)
    page.get_by_test_id("toolset-checkbox-web").uncheck()
    expect(page.get_by_test_id("toolset-row-web")).to_contain_text("(0/")
    page.get_by_test_id("new-chat").click()
    page.wait_for_url(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "What time is it in Paris?")
    page.wait_for_url("**/chats/*/")
    wait_turn_done(page)
    newest = Chat.objects.order_by("-id").first()
    assert newest is not None and "web" not in newest.enabled_tools
    assert "clock_math" in newest.enabled_tools


def test_agentic_chat_uses_exa(page: Page, exa_configured: FakeExa) -> None:
    open_chat(page)
    open_popover(page)
    page.get_by_test_id("toolset-checkbox-exa").check()
    expect(page.get_by_test_id("toolset-row-exa")).to_contain_text("(4/4)")
    page.keyboard.press("Escape")
    send(page, "What's the latest news about AI?")
    card = page.get_by_test_id("tool-call-message").last
    expect(card).to_contain_text("Exa: Search", timeout=15_000)
    wait_turn_done(page)
    expect(card).to_have_attribute("data-status", "success")
    answer = page.locator(".turn").last.locator(".md").last
    result = ToolExecution.objects.filter(tool="search").get().result
    assert result is not None
    first_title = result["results"][0]["title"]
    expect(answer).to_contain_text(first_title)
    assert exa_configured.requests[-1].path == "/search"


def test_a_toolset_checked_just_before_sending_applies_to_that_message(page: Page, exa_configured: FakeExa) -> None:
    open_chat(page)
    held: list[Route] = []

    def hold(route: Route) -> None:  # the selection's save is slow to arrive
        held.append(route)

    page.route("**/chats/*/tools/", hold)
    open_popover(page)
    page.get_by_test_id("toolset-checkbox-exa").check()
    page.keyboard.press("Escape")
    send(page, "What's the latest news about AI?")
    page.wait_for_timeout(700)
    assert len(held) == 1
    assert page.locator(".turn").count() == 1, "the message went out before the selection was saved"
    held[0].continue_()
    card = page.get_by_test_id("tool-call-message").last
    expect(card).to_contain_text("Exa: Search", timeout=15_000)
    wait_turn_done(page)
    expect(card).to_have_attribute("data-status", "success")


def test_card_is_open_while_calling_and_closes_when_done_unless_opened(page: Page, exa_configured: FakeExa) -> None:
    open_chat(page)
    open_popover(page)
    page.get_by_test_id("toolset-checkbox-exa").check()
    expect(page.get_by_test_id("toolset-row-exa")).to_contain_text("(4/4)")
    page.keyboard.press("Escape")
    # The fake Exa server answers "[exa:slow]" queries after a few seconds.
    send(page, "Search the web for [exa:slow] llamas")
    card = page.locator('[data-testid=tool-call-message][data-tool="toolset__exa__search"]').last
    expect(card).to_have_attribute("data-status", "calling", timeout=15_000)
    assert card.evaluate("c => c.open")
    expect(card.get_by_test_id("tool-call-summary")).to_contain_text("Searching the web for")
    wait_turn_done(page, timeout=30_000)
    expect(card).to_have_attribute("data-status", "success")
    assert not card.evaluate("c => c.open")

    send(page, "Search the web for [exa:slow] alpacas")
    card = page.locator('[data-testid=tool-call-message][data-tool="toolset__exa__search"]').last
    expect(card).to_have_attribute("data-status", "calling", timeout=15_000)
    card.locator("summary").click()  # the reader closes it…
    card.locator("summary").click()  # …and opens it again: from now on it is theirs
    wait_turn_done(page, timeout=30_000)
    expect(card).to_have_attribute("data-status", "success")
    assert card.evaluate("c => c.open")
    expect(card).to_contain_text("Took")
