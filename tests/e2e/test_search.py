"""Searching chats from the sidebar: results as you type with highlighted matches, only the
user's own chats, keyboard navigation, "/" to focus, and the results page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, Message

from .conftest import PASSWORD, login, send_and_wait, shot, wait_socket
from .test_accessibility import Checker

pytestmark = pytest.mark.e2e


def make_chat(owner: Any, title: str, *texts: str) -> Chat:
    chat = Chat.objects.create(owner=owner, title=title)
    for i, text in enumerate(texts):
        Message.objects.create(chat=chat, role="user" if i % 2 == 0 else "assistant", content=text)
    return chat


@pytest.fixture
def library(e2e_user: Any) -> dict[str, Chat]:
    other = get_user_model().objects.create_user("mallory", password=PASSWORD)
    make_chat(other, "Kyoto secrets of mallory", "kyoto kyoto")
    return {
        "budget": make_chat(e2e_user, "Q3 budget", "Plan the webinar budget", "Here is a plan <b>not bold</b>."),
        "trip": make_chat(
            e2e_user, "Trip planning", "Which temples in Kyoto?", "Kinkaku-ji and Fushimi Inari in Kyoto."
        ),
        "kyoto": make_chat(e2e_user, "Kyoto food", "Where to eat in Kyoto?", "Nishiki market."),
    }


def hits(page: Page) -> Any:
    return page.locator("#chat-search-results a[data-search-hit]")


def test_search_as_you_type_with_highlights_and_keyboard(page: Page, library: dict[str, Chat]) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    search = page.locator("#chat-search-input")
    # The composer has the focus on load, and "/" is a character there; anywhere else it searches.
    page.keyboard.type("/")
    expect(page.locator("#composer-input")).to_have_value("/")
    page.locator("#composer-input").fill("")
    page.locator("#chat-title").click()
    page.keyboard.press("/")
    expect(search).to_be_focused()
    page.keyboard.type("kyo", delay=60)
    expect(hits(page)).to_have_count(2)
    expect(page.locator("#chat-list")).to_be_hidden()
    # Newest first: the Kyoto food chat was created last; mallory's chat is not among them.
    expect(hits(page).nth(0)).to_contain_text("Kyoto food")
    expect(hits(page).nth(1)).to_contain_text("Trip planning")
    expect(page.locator("#chat-search-results")).not_to_contain_text("mallory")
    expect(hits(page).nth(0).locator("mark").first).to_have_text("Kyo")
    expect(hits(page).nth(1).locator(".search-hit-snippet mark")).to_have_text("Kyo")
    expect(page.locator("#chat-search-status")).to_have_text("2 chats found.")
    shot(page, "search-sidebar-light")

    page.keyboard.press("ArrowDown")
    expect(hits(page).nth(0)).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(hits(page).nth(1)).to_be_focused()
    page.keyboard.press("ArrowDown")  # stays on the last
    expect(hits(page).nth(1)).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(search).to_be_focused()

    # Narrowing the query narrows the results; a second word must match too.
    page.keyboard.type(" fushimi", delay=40)
    expect(hits(page)).to_have_count(1)
    expect(hits(page).first).to_contain_text("Trip planning")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/chats/{library['trip'].pk}/")
    wait_socket(page)


def test_escape_clears_and_enter_opens_the_first_result(page: Page, library: dict[str, Chat]) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    search = page.locator("#chat-search-input")
    search.click()
    page.keyboard.type("webinar", delay=40)
    expect(hits(page)).to_have_count(1)
    # The snippet's markup is text, escaped.
    page.keyboard.press("Backspace")
    page.keyboard.type("r plan", delay=40)
    expect(hits(page)).to_have_count(1)
    page.keyboard.press("Escape")
    expect(search).to_have_value("")
    expect(page.locator("#chat-list")).to_be_visible()
    expect(page.locator("#chat-search-results")).to_be_hidden()
    page.keyboard.type("not bold", delay=40)
    expect(hits(page).first.locator(".search-hit-snippet")).to_contain_text("<b>not bold</b>")
    expect(hits(page).first.locator(".search-hit-snippet b")).to_have_count(0)
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/chats/{library['budget'].pk}/")


def test_slash_types_normally_in_the_composer(page: Page, library: dict[str, Chat]) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.locator("#composer-input").click()
    page.keyboard.type("a/b")
    expect(page.locator("#composer-input")).to_have_value("a/b")
    expect(page.locator("#chat-search-input")).not_to_be_focused()


@pytest.mark.parametrize("text", ['"NEAR(', "' OR 1=1 --", "*:^", "<img src=x onerror=alert(1)>"])
def test_hostile_queries_show_no_results_and_no_error(page: Page, library: dict[str, Chat], text: str) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.locator("#chat-search-input").fill(text)
    expect(page.locator("#chat-search-results .search-empty")).to_contain_text("No chats match")
    expect(page.locator("#chat-search-results img")).to_have_count(0)


def test_a_chat_written_through_the_real_stack_is_found(page: Page, library: dict[str, Chat]) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send_and_wait(page, "What is 12*7? Also say zebracorn.")
    chat_url = page.url
    page.locator("#chat-search-input").fill("zebraco")
    expect(hits(page)).to_have_count(1)
    expect(hits(page).first.locator("mark").first).to_have_text("zebraco", ignore_case=True)
    assert hits(page).first.get_attribute("href") in chat_url


def test_results_page_and_phone_drawer(browser: Browser, stack: Any, library: dict[str, Chat]) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    login(page, stack.url)
    page.locator('[data-action="open-sidebar"]').click()
    page.locator("#chat-search-input").fill("kyoto")
    expect(hits(page)).to_have_count(2)
    shot(page, "search-sidebar-phone")
    page.goto(stack.url + "/search/?q=kyoto")
    expect(page.locator(".search-results-page a[data-search-hit]")).to_have_count(2)
    shot(page, "search-page-phone", full_page=True)
    context.close()


def test_search_results_pass_axe_in_both_themes(axe_signed_in: Page, library: dict[str, Chat]) -> None:
    page = axe_signed_in
    check = Checker(page)
    page.locator("#chat-search-input").fill("kyoto")
    expect(hits(page)).to_have_count(2)
    check("search-sidebar")
    page.locator("#chat-search-input").fill("zzzz nothing")
    expect(page.locator("#chat-search-results .search-empty")).to_be_visible()
    check("search-sidebar-empty")
    full = Checker(page, full_page=True)
    page.goto(page.base_url + "/search/?q=kyoto")  # type: ignore[attr-defined]
    full("search-page")
    page.goto(page.base_url + "/search/")  # type: ignore[attr-defined]
    full("search-page-empty")
    check.assert_clean()
    full.assert_clean()
