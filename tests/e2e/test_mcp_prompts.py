"""The composer's MCP controls in a real browser against a real stack: the "/" menu of a
server's prompts (keyboard only), argument suggestions from `completion/complete`, a prompt with
an image inserted into the conversation, and the resource picker with a template — each the
same after a reload, and free of serious accessibility violations."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.core.cache import cache
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, UserChatDefaults
from tests.toolsets.mcp.conftest import Restartable, register, seen_by_stack
from tests.toolsets.mcp.test_prompts import PROMPT_SERVER
from toolsets.files.models import FileLimits

from .axe import axe_violations, blocking
from .conftest import browser_page, normalized_messages, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


@pytest.fixture
def prompt_server() -> Iterator[Restartable]:
    # Over streamable HTTP: one server process for the whole test (a stdio server is started
    # for each of the page's requests, which costs seconds on a busy machine).
    server = Restartable(PROMPT_SERVER, "http", "{port}")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def refusing_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    """Signed in, axe-ready, and expecting the browser to log the 413 of a refused resource."""
    with browser_page(
        browser,
        stack.url,
        bypass_csp=True,
        allow_console=("Failed to load resource: the server responded with a status of 413",),
    ) as found:
        yield found


def _chat_with_server(owner: Any, server: Restartable) -> Chat:
    url = f"http://127.0.0.1:{server.port}/mcp"
    # Off Playwright's thread, which runs its own event loop.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(register, name="Prompt server", slug="ps", transport="http", url=url).result()
    seen_by_stack()
    return Chat.objects.create(owner=owner, title="Prompts", enabled_tools={"mcp_ps": ["toolset__mcp_ps__echo"]})


def _no_blocking(page: Page, selector: str) -> None:
    found = blocking(axe_violations(page, selector))
    assert not found, found


def test_slash_menu_by_keyboard_completion_and_a_prompt_with_an_image(
    axe_signed_in: Page, stack: Any, e2e_user: Any, prompt_server: Restartable
) -> None:
    page = axe_signed_in
    chat = _chat_with_server(e2e_user, prompt_server)
    page.goto(f"{stack.url}/chats/{chat.pk}/")
    wait_socket(page)
    box = page.locator("#composer-input")
    box.focus()
    page.keyboard.type("/")
    menu = page.get_by_test_id("mcp-prompt-menu")
    expect(menu).to_be_visible(timeout=20_000)
    options = page.get_by_test_id("mcp-prompt-option")
    expect(options).to_have_count(2)
    # The textarea keeps focus and points at the active option.
    first = options.nth(0).get_attribute("id")
    expect(box).to_have_attribute("aria-activedescendant", first or "")
    expect(box).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(box).to_have_attribute("aria-activedescendant", options.nth(1).get_attribute("id") or "")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    shot(page, "mcp-prompt-menu")
    _no_blocking(page, "#mcp-panel")
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("mcp-panel")).to_be_hidden()
    expect(box).to_have_value("/")  # Escape closes the menu; nothing is lost or sent

    page.keyboard.type("rev")
    expect(options).to_have_count(1, timeout=10_000)
    expect(options.first).to_contain_text("/review")
    page.keyboard.press("Enter")
    form = page.get_by_test_id("mcp-prompt-form")
    expect(form).to_be_visible(timeout=20_000)
    language = page.get_by_label("language (required)")
    expect(language).to_be_focused()
    page.keyboard.type("p")
    suggestions = page.locator("#mcp-prompt-form datalist option")
    expect(suggestions).to_have_count(3, timeout=20_000)  # python, perl, php
    values = suggestions.evaluate_all("os => os.map(o => o.value)")
    assert set(values) == {"python", "perl", "php"}
    page.keyboard.type("y")
    expect(suggestions).to_have_count(1, timeout=20_000)
    assert suggestions.first.get_attribute("value") == "python"
    shot(page, "mcp-prompt-arguments")
    _no_blocking(page, "#mcp-panel")
    language.fill("python")
    page.get_by_test_id("mcp-prompt-insert").click()
    expect(box).to_have_value("Review this python code: <b>not markup</b>.", timeout=20_000)
    expect(page.get_by_test_id("mcp-panel")).to_be_hidden()

    # A prompt with an example exchange, an image and an embedded resource.
    box.fill("")
    box.focus()
    page.keyboard.type("/pic")
    expect(options).to_have_count(1, timeout=10_000)
    page.keyboard.press("Enter")
    expect(form).to_be_visible(timeout=20_000)
    page.get_by_test_id("mcp-prompt-insert").click()
    expect(box).to_have_value("What colour is this pixel?", timeout=20_000)
    expect(page.locator(".msg-user .bubble", has_text="Is this an example?")).to_be_visible()
    expect(page.locator("#messages")).not_to_contain_text("alert(1)")  # sanitized, not run
    chips = page.get_by_test_id("attach-chip")
    expect(chips).to_have_count(2)
    expect(page.locator(".file-chip.is-ready")).to_have_count(2, timeout=30_000)
    shot(page, "mcp-prompt-inserted")
    before = page.locator(".turn").count()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelectorAll('.turn').length > {before}", timeout=20_000)
    wait_turn_done(page)
    expect(page.locator("body")).not_to_have_class(re.compile(r"\bis-running\b"), timeout=30_000)
    expect(page.get_by_test_id("message-file")).to_have_count(2)
    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == live
    expect(page.locator(".msg-user .bubble", has_text="What colour is this pixel?")).to_be_visible()

    # A "/" word that names no prompt is a message like any other: Enter sends it.
    box.focus()
    page.keyboard.type("/nothing")
    expect(page.get_by_test_id("mcp-prompt-empty")).to_be_visible(timeout=20_000)
    before = page.locator(".turn").count()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelectorAll('.turn').length > {before}", timeout=20_000)
    expect(page.locator(".msg-user .bubble", has_text="/nothing")).to_be_visible()
    wait_turn_done(page)


def test_resource_picker_attaches_a_resource_and_a_template_and_reload_shows_them(
    refusing_page: Page, stack: Any, e2e_user: Any, prompt_server: Restartable
) -> None:
    page = refusing_page
    chat = _chat_with_server(e2e_user, prompt_server)
    page.goto(f"{stack.url}/chats/{chat.pk}/")
    wait_socket(page)
    button = page.get_by_test_id("mcp-resources-button")
    button.click()
    picker = page.get_by_test_id("mcp-resource-picker")
    expect(picker).to_be_visible(timeout=20_000)
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(picker).to_contain_text("notes://today")
    shot(page, "mcp-resource-picker")
    _no_blocking(page, "#mcp-panel")
    picker.get_by_role("button", name="Attach Today's notes").click()
    expect(page.get_by_test_id("attach-chip")).to_have_count(1, timeout=20_000)

    button.click()
    expect(picker).to_be_visible(timeout=20_000)
    template = page.get_by_test_id("mcp-template").filter(has_text="weather://")
    country = template.get_by_label("country")
    country.fill("f")
    expect(template.locator("datalist").first.locator("option")).to_have_count(1, timeout=20_000)
    country.fill("fr")
    city = template.get_by_label("city")
    city.fill("")
    city.type("l")
    expect(template.locator("datalist").nth(1).locator("option")).to_have_count(1, timeout=20_000)
    assert template.locator("datalist").nth(1).locator("option").first.get_attribute("value") == "lyon"
    shot(page, "mcp-resource-template")
    city.fill("lyon")
    template.get_by_test_id("mcp-template-attach").click()
    expect(page.get_by_test_id("attach-chip")).to_have_count(2, timeout=20_000)
    expect(page.locator(".file-chip.is-ready")).to_have_count(2, timeout=30_000)

    # A resource over the admin's file limit: a clear message, nothing attached.
    FileLimits.objects.update_or_create(pk=1, defaults={"max_file_mb": 1})
    cache.delete(FileLimits.CACHE_KEY)
    button.click()
    expect(picker).to_be_visible(timeout=20_000)
    picker.get_by_role("button", name="Attach Too big").click()
    expect(page.get_by_test_id("mcp-alert")).to_contain_text("larger than 1 MB", timeout=20_000)
    expect(page.get_by_test_id("attach-chip")).to_have_count(2)
    page.keyboard.press("Escape")
    expect(picker).to_be_hidden()
    expect(button).to_be_focused()
    send_and_wait(page, "What do these say?")
    expect(page.get_by_test_id("message-file")).to_have_count(2, timeout=20_000)
    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == live
    names = page.get_by_test_id("message-file").all_inner_texts()
    assert any("Today" in n for n in names) and any("lyon" in n for n in names)


def test_slash_on_the_new_chat_page_creates_the_chat_with_the_prompts_messages(
    axe_signed_in: Page, stack: Any, e2e_user: Any, prompt_server: Restartable
) -> None:
    page = axe_signed_in
    url = f"http://127.0.0.1:{prompt_server.port}/mcp"
    with ThreadPoolExecutor(1) as thread:
        thread.submit(register, name="Prompt server", slug="ps", transport="http", url=url).result()
    seen_by_stack()
    # The toolsets the home page's popover chose are those of the chat it creates.
    UserChatDefaults.objects.update_or_create(user=e2e_user, defaults={"enabled_tools": {"mcp_ps": ["echo"]}})
    # The server's tools are listed in the background: until then the home page's popover (and
    # so the chat it creates) does not offer it.
    for _ in range(20):
        page.goto(f"{stack.url}/")
        if page.get_by_test_id("toolset-item-mcp_ps").count():
            break
        page.wait_for_timeout(1000)
    expect(page.get_by_test_id("tool-checkbox-mcp_ps-echo")).to_be_checked()
    box = page.locator("#composer-input")
    box.focus()
    page.keyboard.type("/")
    options = page.get_by_test_id("mcp-prompt-option")
    expect(options).to_have_count(2, timeout=20_000)
    expect(box).to_be_focused()
    shot(page, "mcp-new-chat-prompt-menu")
    _no_blocking(page, "#mcp-panel")

    # A prompt that only asks stays in the composer: no chat yet.
    page.keyboard.type("rev")
    expect(options).to_have_count(1, timeout=10_000)
    page.keyboard.press("Enter")
    form = page.get_by_test_id("mcp-prompt-form")
    expect(form).to_be_visible(timeout=20_000)
    page.get_by_label("language (required)").fill("go")
    page.get_by_test_id("mcp-prompt-insert").click()
    expect(box).to_have_value("Review this go code: <b>not markup</b>.", timeout=20_000)
    assert page.url == f"{stack.url}/"
    assert not Chat.objects.filter(owner=e2e_user).exists()
    # A resource attached here first stays with the composer when the page moves to the chat.
    page.get_by_test_id("mcp-resources-button").click()
    picker = page.get_by_test_id("mcp-resource-picker")
    expect(picker).to_be_visible(timeout=20_000)
    picker.get_by_role("button", name="Attach Today's notes").click()
    expect(page.locator(".file-chip.is-ready")).to_have_count(1, timeout=30_000)

    # A prompt with an answered example creates the chat; the page continues on it with the
    # prompt's exchange, and its question and files wait in the composer.
    box.fill("")
    box.focus()
    page.keyboard.type("/pic")
    expect(options).to_have_count(1, timeout=10_000)
    page.keyboard.press("Enter")
    expect(form).to_be_visible(timeout=20_000)
    _no_blocking(page, "#mcp-panel")
    page.get_by_test_id("mcp-prompt-insert").click()
    page.wait_for_url(re.compile(r"/chats/\d+/$"), timeout=20_000)
    chat = Chat.objects.get(owner=e2e_user)
    assert page.url == f"{stack.url}/chats/{chat.pk}/"
    assert chat.enabled_tools == {"mcp_ps": ["echo"]}
    wait_socket(page)
    expect(page.locator(".msg-user .bubble", has_text="Is this an example?")).to_be_visible()
    expect(page.locator("#messages")).not_to_contain_text("alert(1)")
    expect(box).to_have_value("What colour is this pixel?", timeout=10_000)
    expect(page.get_by_test_id("attach-chip")).to_have_count(3)
    expect(page.locator(".file-chip.is-ready")).to_have_count(3, timeout=30_000)
    expect(page.get_by_test_id("attach-chip").first).to_contain_text("Today")
    expect(page.locator("#chat-list")).to_contain_text("Is this an example?")
    shot(page, "mcp-new-chat-prompt-inserted")
    _no_blocking(page, "body")
    before = page.locator(".turn").count()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => document.querySelectorAll('.turn').length > {before}", timeout=20_000)
    wait_turn_done(page)
    expect(page.get_by_test_id("message-file")).to_have_count(3, timeout=20_000)
    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == live
    # Carried over once: a reload does not put the question back.
    expect(box).to_have_value("")
    expect(page.get_by_test_id("attach-chip")).to_have_count(0)


def test_a_resource_attached_on_the_new_chat_page_goes_with_the_first_message(
    axe_signed_in: Page, stack: Any, e2e_user: Any, prompt_server: Restartable
) -> None:
    page = axe_signed_in
    url = f"http://127.0.0.1:{prompt_server.port}/mcp"
    with ThreadPoolExecutor(1) as thread:
        thread.submit(register, name="Prompt server", slug="ps", transport="http", url=url).result()
    seen_by_stack()
    UserChatDefaults.objects.update_or_create(user=e2e_user, defaults={"enabled_tools": {"mcp_ps": ["echo"]}})
    for _ in range(20):
        page.goto(f"{stack.url}/")
        if page.get_by_test_id("toolset-item-mcp_ps").count():
            break
        page.wait_for_timeout(1000)
    button = page.get_by_test_id("mcp-resources-button")
    button.click()
    picker = page.get_by_test_id("mcp-resource-picker")
    expect(picker).to_be_visible(timeout=20_000)
    expect(picker).to_contain_text("notes://today")
    shot(page, "mcp-new-chat-resource-picker")
    _no_blocking(page, "#mcp-panel")
    picker.get_by_role("button", name="Attach Today's notes").click()
    expect(page.get_by_test_id("attach-chip")).to_have_count(1, timeout=20_000)
    expect(page.locator(".file-chip.is-ready")).to_have_count(1, timeout=30_000)
    assert not Chat.objects.filter(owner=e2e_user).exists()  # an attachment alone starts nothing
    page.fill("#composer-input", "What do the notes say?")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/chats/\d+/$"), timeout=20_000)
    wait_socket(page)
    wait_turn_done(page)
    expect(page.get_by_test_id("message-file")).to_have_count(1, timeout=20_000)
    assert "Today" in page.get_by_test_id("message-file").first.inner_text()
    chat = Chat.objects.get(owner=e2e_user)
    assert chat.enabled_tools.get("mcp_ps") == ["echo"]
