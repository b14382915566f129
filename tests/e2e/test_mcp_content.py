"""What MCP tools return, on their cards: an image, audio, a file and a link to a resource of
the server's own scheme — live, the same after a reload, and the link opening Tessera's preview
page read through the server."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import SERVER, register, seen_by_stack
from toolsets.models import ToolsetConfig

from .conftest import SHOTS, normalized_messages, send, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e


def open_all_cards(page: Page) -> None:
    # The turn's last fragments may still replace the cards (closed) just after it ends: open
    # them until they stay open.
    for _ in range(20):
        page.eval_on_selector_all("details.tool-card", "cards => cards.forEach((card) => { card.open = true; })")
        page.wait_for_timeout(250)
        if page.locator("details.tool-card:not([open])").count() == 0:
            return
    raise AssertionError("the tool cards did not stay open")


def test_image_audio_file_and_resource_link_cards_are_the_same_live_and_reloaded(page: Page, stack: Any) -> None:
    # Off Playwright's thread, which runs its own event loop.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(register, name="Test server", slug="cards", transport="stdio", **forked(SERVER)).result()
    # The admin lets this server's tools run without asking (its annotations are not trusted).
    ToolsetConfig.objects.create(toolset_id="mcp_cards", policy="auto")
    seen_by_stack()

    page.goto(stack.url + "/")
    send(page, "Hello")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    page.get_by_test_id("toolsets-popover-trigger").click()
    box = page.get_by_test_id("toolset-checkbox-mcp_cards")
    if not box.is_checked():
        box.check()
    expect(box).to_be_checked()
    page.keyboard.press("Escape")

    send(page, "use the picture tool, use the sound tool, use the attachment tool, use the linked tool")
    # The server's four (past the tool budget the model may look them up first: find_tools).
    cards = page.locator('.tool-card[data-tool^="toolset__mcp_cards__"]')
    expect(cards).to_have_count(4, timeout=30_000)  # the new turn is under way: its state is shown
    expect(page.locator('.tool-card.is-success[data-tool^="toolset__mcp_cards__"]')).to_have_count(4, timeout=30_000)
    wait_turn_done(page)
    expect(page.locator("body")).not_to_have_class(re.compile(r"\bis-running\b"), timeout=30_000)
    live = normalized_messages(page)
    open_all_cards(page)
    expect(page.locator("img.tc-image")).to_have_count(1)
    expect(page.get_by_test_id("tool-call-audio")).to_have_count(1)
    expect(page.get_by_test_id("tool-call-download")).to_have_count(2)  # the clip and the file
    expect(page.locator(".tc-media code", has_text="files://report.bin")).to_be_visible()
    link = page.get_by_test_id("tool-call-resource-link")
    expect(link).to_have_text("Today's notes")
    shot(page, "mcp-content-cards", full_page=True)

    page.reload()
    wait_socket(page)
    again = normalized_messages(page)
    if again != live:
        (SHOTS / "mcp-content-live.html").write_text(live)
        (SHOTS / "mcp-content-reload.html").write_text(again)
    assert again == live

    open_all_cards(page)
    expect(page.locator("img.tc-image")).to_be_visible()
    with page.context.expect_page() as opened:
        page.get_by_test_id("tool-call-resource-link").click()
    preview = opened.value
    preview.wait_for_load_state()
    expect(preview.get_by_test_id("mcp-resource-uri")).to_have_text("notes://today")
    # The server's text, shown as text: its markup is not Tessera's.
    expect(preview.get_by_test_id("mcp-resource-content")).to_contain_text("Buy <b>milk</b>")
    shot(preview, "mcp-resource-preview")
