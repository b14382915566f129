"""Everyday chat controls in a real browser against the real stack: settings before the first
message, editing a question and regenerating an answer as versions of an exchange, copying,
highlighted code, calling cards without an empty strip, and the keyboard."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, LLMModel, Message, Turn

from .conftest import login, send, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e


@pytest.fixture
def second_model(e2e_user: Any) -> LLMModel:
    return LLMModel.objects.create(name="Demo two", model="demo/two")


def start_chat(page: Page, text: str) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, text)
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)


def answers(page: Page) -> Any:
    return page.locator("section.turn")


def test_a_control_changed_right_after_a_swap_is_not_lost(page: Page, second_model: LLMModel) -> None:
    """The settings form is replaced by each answer; a change made the moment the new one is in
    the page (before htmx's default 20 ms settle wired it) must still be sent."""
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.get_by_role("button", name="Chat settings").click()
    panel = page.get_by_test_id("settings-panel")
    expect(panel).to_be_visible()
    page.evaluate(
        """() => {
            document.body.addEventListener("htmx:afterSwap", () => setTimeout(() => {
                const steps = document.querySelector("[data-testid=max-tool-iterations-input]");
                steps.value = "3";
                steps.dispatchEvent(new Event("change", {bubbles: true}));
            }), {once: true});
            const model = document.querySelector("[data-testid=settings-model]");
            model.selectedIndex = 1;
            model.dispatchEvent(new Event("change", {bubbles: true}));
        }"""
    )
    expect(panel).to_contain_text("at most 3 tool steps")
    expect(page.get_by_test_id("settings-model-name")).to_have_text("Demo two")


def test_settings_and_tools_chosen_before_the_first_message_apply_to_the_new_chat(
    page: Page, second_model: LLMModel
) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    button = page.get_by_role("button", name="Chat settings")
    expect(button).to_contain_text("Demo (offline)")
    button.click()
    panel = page.get_by_test_id("settings-panel")
    expect(panel).to_be_visible()
    page.get_by_test_id("settings-model").select_option(label="Demo two")
    expect(page.get_by_test_id("settings-model-name")).to_have_text("Demo two")
    steps = page.get_by_test_id("max-tool-iterations-input")
    steps.fill("2")
    steps.press("Tab")
    expect(panel.locator(".sp-saved")).to_have_text("Applies to the new chat")
    expect(panel).to_contain_text("at most 2 tool steps")
    shot(page, "everyday-home-settings-light")
    # The tools popover works too, before anything is sent.
    page.get_by_test_id("toolsets-popover-trigger").click()
    page.get_by_test_id("toolset-expand-clock_math").click()
    page.get_by_test_id("tool-checkbox-clock_math-calculate").uncheck()
    expect(page.get_by_test_id("toolset-row-clock_math")).to_contain_text("(1/2)")
    page.keyboard.press("Escape")
    page.keyboard.press("Escape")  # the settings panel closes too
    expect(panel).to_be_hidden()

    send(page, "What time is it in Tokyo?")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)

    chat = Chat.objects.get()
    assert chat.model == second_model
    assert (chat.limit_tool_iterations, chat.max_tool_iterations) == (True, 2)
    assert chat.enabled_tools["clock_math"] == ["current_time"]
    assert Turn.objects.get().model == second_model
    expect(page.get_by_role("button", name="Chat settings")).to_contain_text("Demo two")


def test_an_edited_question_is_a_branch_and_each_version_keeps_its_answer_and_cards(page: Page) -> None:
    start_chat(page, "What is 12*7?")
    expect(answers(page).last).to_contain_text("84")
    expect(page.get_by_test_id("tool-call-message")).to_contain_text("Calculate")
    send_and_wait(page, "And what is 2+3?")
    expect(answers(page).last).to_contain_text("5")

    # Edit the first question: everything after it gives way to the new branch.
    first = page.locator(".msg-user").first
    first.get_by_role("button", name="Edit message").click()
    box = first.get_by_test_id("edit-input")
    expect(box).to_be_focused()
    box.fill("What time is it in Tokyo?")
    shot(page, "everyday-edit-light")
    box.press("Enter")
    page.wait_for_function("() => document.querySelectorAll('.msg-user').length === 1")
    wait_turn_done(page)
    expect(page.locator(".msg-user")).to_contain_text("What time is it in Tokyo?")
    expect(page.get_by_test_id("tool-call-message")).to_have_count(1)
    expect(page.get_by_test_id("tool-call-message")).to_contain_text("Current time")
    label = page.locator(".msg-user").first.get_by_test_id("version-label")
    expect(label).to_have_text("2 / 2")
    shot(page, "everyday-branch-v2-light")

    # Back to version 1: its answer, its card, and the exchange that followed it.
    page.get_by_role("button", name="Previous version").click()
    expect(label).to_have_text("1 / 2")
    expect(page.locator(".msg-user")).to_have_count(2)
    expect(page.locator(".msg-user").first).to_contain_text("What is 12*7?")
    expect(answers(page).first).to_contain_text("84")
    expect(page.get_by_test_id("tool-call-message")).to_have_count(2)
    expect(page.get_by_test_id("tool-call-message").first).to_contain_text("Calculate")
    expect(page.get_by_role("button", name="Next version")).to_be_enabled()
    expect(page.get_by_role("button", name="Previous version")).to_be_disabled()

    page.reload()
    wait_socket(page)
    expect(page.locator(".msg-user").first.get_by_test_id("version-label")).to_have_text("1 / 2")
    expect(page.locator(".msg-user").first).to_contain_text("What is 12*7?")
    expect(answers(page).first).to_contain_text("84")
    expect(page.locator(".msg-user")).to_have_count(2)

    page.get_by_role("button", name="Next version").click()
    expect(page.locator(".msg-user").first.get_by_test_id("version-label")).to_have_text("2 / 2")
    expect(page.locator(".msg-user")).to_have_count(1)
    expect(page.get_by_test_id("tool-call-message")).to_contain_text("Current time")
    page.reload()
    wait_socket(page)
    expect(page.locator(".msg-user")).to_have_count(1)
    expect(page.get_by_test_id("tool-call-message")).to_contain_text("Current time")
    assert Turn.objects.count() == 3


def test_regenerate_with_another_model_from_the_menu(page: Page, second_model: LLMModel) -> None:
    start_chat(page, "What is 12*7?")
    regenerate = page.get_by_role("button", name="Regenerate answer")
    regenerate.click()
    menu = page.locator(".regen-menu")
    expect(menu).to_be_visible()
    expect(page.get_by_test_id("regenerate-same")).to_be_focused()
    shot(page, "everyday-regenerate-menu-light")
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(regenerate).to_be_focused()

    regenerate.click()
    menu.get_by_role("button", name="With Demo two").click()
    page.wait_for_function(
        "() => document.querySelectorAll('section.turn').length === 1 && "
        "document.querySelector('[data-testid=version-label]')"
    )
    wait_turn_done(page)
    actions = page.get_by_test_id("answer-actions")
    expect(actions.get_by_test_id("version-label")).to_have_text("2 / 2")
    expect(answers(page).last).to_contain_text("84")
    assert Turn.objects.latest("id").model == second_model
    actions.get_by_role("button", name="Previous version").click()
    expect(page.get_by_test_id("answer-actions").get_by_test_id("version-label")).to_have_text("1 / 2")
    expect(page.locator(".msg-user")).to_have_count(1)


def test_edit_and_regenerate_wait_for_the_running_answer(page: Page) -> None:
    start_chat(page, "What is 12*7?")
    send(page, "[demo:slow] tell me a long story")
    expect(page.locator("body.is-running")).to_have_count(1)
    expect(page.locator(".msg-user").first.get_by_role("button", name="Edit message")).to_be_disabled()
    expect(page.get_by_role("button", name="Regenerate answer").first).to_be_disabled()
    # The server refuses too, with a clear reason.
    first_turn = Turn.objects.order_by("id").first()
    assert first_turn is not None
    token = page.evaluate("JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRFToken']")
    response = page.request.post(
        f"{page.base_url}/turns/{first_turn.pk}/regenerate/",  # type: ignore[attr-defined]
        headers={"X-CSRFToken": token, "Referer": page.url},
    )
    status = [response.status, response.text()]
    assert status == [409, "Wait for the current answer to finish, or stop it."]
    page.get_by_test_id("stop-button").click()
    wait_turn_done(page)
    expect(page.locator(".msg-user").first.get_by_role("button", name="Edit message")).to_be_enabled()


def test_copy_a_message_an_answer_and_a_highlighted_code_block(browser: Browser, stack: Any, e2e_user: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.url)
    page = context.new_page()
    page.base_url = stack.url  # type: ignore[attr-defined]
    login(page, stack.url)
    start_chat(page, "[demo:slow] show me some code")

    code = page.locator("[data-code-block]").first
    expect(code.locator(".hl-k").first).to_be_visible()  # highlighted on the server
    code.get_by_role("button", name="Copy code").click()
    expect(code.get_by_role("button", name="Copy code")).to_have_attribute("data-copied", "Copied")
    assert page.evaluate("navigator.clipboard.readText()").startswith("def tokens(text: str) -> list[str]:")

    page.get_by_role("button", name="Copy answer").click()
    expect(page.get_by_role("button", name="Copy answer")).to_have_attribute("data-copied", "Copied")
    expect(page.locator("#announce")).to_have_text("Copied")
    stored = Message.objects.filter(role="assistant").latest("id").content
    assert page.evaluate("navigator.clipboard.readText()") == stored.strip()
    assert "```python" in stored

    page.get_by_role("button", name="Copy message").click()
    expect(page.get_by_role("button", name="Copy message")).to_have_attribute("data-copied", "Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "[demo:slow] show me some code"
    shot(page, "everyday-code-light")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    shot(page, "everyday-code-dark")
    # Highlighting was rendered once and stored with the message.
    assert 'class="hl-k"' in Message.objects.filter(role="assistant").latest("id").html
    context.close()


TRACK_EMPTY_BODIES = """
() => {
  window.__emptyBodies = [];
  window.__runningCards = 0;
  const check = () => document.querySelectorAll('[data-tool-card]').forEach((card) => {
    if (!['pending', 'calling'].includes(card.dataset.status)) return;
    window.__runningCards += 1;
    const body = card.querySelector('.tc-body');
    if (body && body.innerText.trim() === '') window.__emptyBodies.push(card.outerHTML.slice(0, 300));
  });
  const options = {subtree: true, childList: true, attributes: true};
  new MutationObserver(check).observe(document.getElementById('messages'), options);
}
"""


def test_a_calling_card_has_no_empty_strip_under_its_header(page: Page) -> None:
    start_chat(page, "hello")
    page.evaluate(TRACK_EMPTY_BODIES)
    send_and_wait(page, "What time is it in Tokyo, and what is 12*7?")
    assert page.evaluate("window.__runningCards") > 0
    assert page.evaluate("window.__emptyBodies") == []
    expect(page.get_by_test_id("tool-call-message")).to_have_count(2)


def test_ctrl_shift_o_starts_a_new_chat_and_escape_closes_menus(page: Page) -> None:
    start_chat(page, "What is 12*7?")
    chat_url = page.url
    page.get_by_test_id("settings-trigger").click()
    expect(page.get_by_test_id("settings-panel")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("settings-panel")).to_be_hidden()
    expect(page.get_by_test_id("settings-trigger")).to_be_focused()
    menu = page.locator(".msg-user").first  # the edit box closes with Escape too
    menu.get_by_role("button", name="Edit message").click()
    page.keyboard.press("Escape")
    expect(menu.get_by_test_id("edit-input")).to_be_hidden()
    assert Turn.objects.count() == 1

    page.keyboard.press("Control+Shift+O")
    page.wait_for_url(page.base_url + "/")  # type: ignore[attr-defined]
    expect(page.locator("#empty-state")).to_be_visible()
    assert chat_url != page.url


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_branches_on_a_phone(browser: Browser, stack: Any, e2e_user: Any, theme: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme=theme)  # type: ignore[arg-type]
    page = context.new_page()
    page.base_url = stack.url  # type: ignore[attr-defined]
    login(page, stack.url)
    start_chat(page, "What is 12*7?")
    first = page.locator(".msg-user").first
    first.get_by_role("button", name="Edit message").click()
    first.get_by_test_id("edit-input").fill("What is 6*7?")
    first.get_by_test_id("edit-send").click()
    expect(page.locator(".msg-user").first.get_by_test_id("version-label")).to_have_text("2 / 2")
    wait_turn_done(page)
    expect(answers(page).last).to_contain_text("42")
    shot(page, f"everyday-phone-{theme}")
    context.close()
