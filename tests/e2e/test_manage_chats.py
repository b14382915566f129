"""Exporting a chat (Markdown, JSON) from its menu and the manage page, and deleting several
chats at once after a confirmation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, Message

from .conftest import PASSWORD, login, send_and_wait, shot
from .test_accessibility import Checker

pytestmark = pytest.mark.e2e


def test_export_a_real_chat_as_markdown_and_json(page: Page) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send_and_wait(page, "What time is it in Tokyo, and what is 12*7?")
    chat = Chat.objects.get()
    link = page.locator(f"#chat-link-{chat.pk}")
    link.hover()
    link.locator("summary").click()
    with page.expect_download() as info:
        link.get_by_test_id("export-md").click()
    md = Path(info.value.path()).read_text()
    assert info.value.suggested_filename.endswith(f"-{chat.pk}.md")
    assert md.startswith(f"# {chat.display_title}\n")
    assert "## You\n\nWhat time is it in Tokyo, and what is 12*7?" in md
    assert "### Tool call: `" in md and "### Result of `" in md
    with page.expect_download() as info:
        link.get_by_test_id("export-json").click()
    data = json.loads(Path(info.value.path()).read_text())
    assert info.value.suggested_filename == f"{Path(info.value.suggested_filename).stem}.json"
    roles = [m["role"] for m in data["messages"]]
    assert roles[0] == "user" and "tool" in roles and roles[-1] == "assistant"
    calls = [c for m in data["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    results = {m["tool_call_id"] for m in data["messages"] if m["role"] == "tool"}
    assert calls and {c["id"] for c in calls} == results
    assert len(data["messages"]) == Message.objects.filter(chat=chat, lane="").exclude(role="system").count()


def test_another_users_export_is_not_found(browser: Browser, stack: Any, e2e_user: Any) -> None:
    other = get_user_model().objects.create_user("mallory", password=PASSWORD)
    theirs = Chat.objects.create(owner=e2e_user, title="Ada's secret")
    context = browser.new_context()
    page = context.new_page()
    login(page, stack.url, "mallory")
    for suffix in ("export.md", "export.json"):
        response = page.request.get(f"{stack.url}/chats/{theirs.pk}/{suffix}")
        assert response.status == 404
    assert other.chats.count() == 0
    context.close()


def test_delete_several_chats_after_confirming(page: Page, e2e_user: Any) -> None:
    chats = [Chat.objects.create(owner=e2e_user, title=f"Chat number {i}") for i in range(4)]
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.get_by_test_id("manage-chats-link").click()
    page.wait_for_url("**/chats/manage/")
    expect(page.get_by_test_id("pick-chat")).to_have_count(4)
    # Select all, then leave one out: the master box shows the mixed state.
    page.get_by_test_id("select-all").check()
    page.locator(f"#pick-{chats[3].pk}").uncheck()
    assert page.get_by_test_id("select-all").evaluate("b => b.indeterminate")
    shot(page, "manage-chats-light", full_page=True)
    page.get_by_test_id("delete-selected").click()
    expect(page.locator("h1")).to_have_text("Delete 3 chats?")
    expect(page.get_by_test_id("confirm-list").locator("li")).to_have_count(3)
    expect(page.get_by_test_id("confirm-list")).not_to_contain_text("Chat number 3")
    shot(page, "manage-confirm-light", full_page=True)
    # Cancel keeps everything.
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url("**/chats/manage/")
    assert Chat.objects.count() == 4
    for chat in chats[:3]:
        page.locator(f"#pick-{chat.pk}").check()
    page.get_by_test_id("delete-selected").click()
    page.get_by_test_id("confirm-delete").click()
    page.wait_for_url("**/chats/manage/")
    expect(page.locator(".form-ok")).to_have_text("Deleted 3 chats.")
    expect(page.get_by_test_id("pick-chat")).to_have_count(1)
    assert list(Chat.objects.values_list("pk", flat=True)) == [chats[3].pk]
    # Nothing selected: a message, nothing deleted.
    page.get_by_test_id("delete-selected").click()
    expect(page.locator(".form-error")).to_have_text("Select at least one chat to delete.")
    assert Chat.objects.count() == 1


def test_manage_pages_on_a_phone(browser: Browser, stack: Any, e2e_user: Any) -> None:
    for i in range(3):
        Chat.objects.create(owner=e2e_user, title=f"A rather long chat title that needs to fit on a phone {i}")
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    login(page, stack.url)
    page.goto(stack.url + "/chats/manage/")
    expect(page.get_by_test_id("pick-chat")).to_have_count(3)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shot(page, "manage-chats-phone", full_page=True)
    context.close()


def test_manage_pages_pass_axe_in_both_themes(axe_signed_in: Page, e2e_user: Any) -> None:
    page = axe_signed_in
    for i in range(2):
        Chat.objects.create(owner=e2e_user, title=f"Chat {i}")
    check = Checker(page, full_page=True)
    page.goto(page.base_url + "/chats/manage/")  # type: ignore[attr-defined]
    check("manage")
    page.get_by_test_id("select-all").check()
    page.get_by_test_id("delete-selected").click()
    check("manage-confirm")
    check.assert_clean()
