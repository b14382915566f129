"""Memory in the browser: the demo model saves a memory on "remember that…", the account page
shows it, edits it, deletes it and offers its exports; axe on the section."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from .axe import axe_violations, blocking, describe
from .conftest import browser_page, send_and_wait, shot, wait_socket

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def memory_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        yield page


def _no_blocking(page: Page, where: str) -> None:
    found = blocking(axe_violations(page))
    assert not found, describe(found, where)


def test_saved_in_a_chat_then_edited_and_deleted_on_the_account_page(memory_page: Page, e2e_user: Any) -> None:
    from chat.models import Chat
    from memory.models import Memory

    page = memory_page
    tools = {"memory": ["save_memory", "update_memory", "forget_memory", "list_memories"]}
    chat = Chat.objects.create(owner=e2e_user, enabled_tools=tools)
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send_and_wait(page, "Remember that I prefer answers in German")
    answer = page.locator(".turn").last
    expect(answer).to_contain_text("Got it, I will remember that: The user prefers answers in German")
    shot(page, "memory-saved")
    assert list(Memory.objects.filter(owner=e2e_user).values_list("text", flat=True)) == [
        "The user prefers answers in German"
    ]

    page.goto(f"{page.base_url}/account/")  # type: ignore[attr-defined]
    section = page.get_by_test_id("memories")
    rows = section.get_by_test_id("memory-row")
    expect(rows).to_have_count(1)
    expect(rows.first.get_by_test_id("memory-text")).to_have_value("The user prefers answers in German")
    _no_blocking(page, "account page with memories")

    rows.first.get_by_test_id("memory-text").fill("The user prefers answers in French")
    rows.first.get_by_role("button", name="Save").click()
    expect(section.get_by_role("status")).to_have_text("Saved.")
    expect(page.get_by_test_id("memory-text").first).to_have_value("The user prefers answers in French")
    page.get_by_test_id("memory-new").fill("The user works in Berlin")
    page.get_by_test_id("memories").get_by_role("button", name="Add").click()
    expect(page.get_by_test_id("memory-row")).to_have_count(2)
    page.get_by_test_id("memories").scroll_into_view_if_needed()
    shot(page, "memory-account", full_page=True)
    _no_blocking(page, "account page after editing memories")

    md = page.request.get(f"{page.base_url}/account/memory/export.md")  # type: ignore[attr-defined]
    assert "The user prefers answers in French" in md.text()

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete “The user works in Berlin”").click()
    expect(page.get_by_test_id("memory-row")).to_have_count(1)
    assert list(Memory.objects.values_list("text", flat=True)) == ["The user prefers answers in French"]

    page.get_by_test_id("memory-enabled").uncheck()
    expect(page.get_by_test_id("memory-off")).to_be_visible()
    expect(page.get_by_test_id("memory-new")).to_be_disabled()
    _no_blocking(page, "account page with memory off")
