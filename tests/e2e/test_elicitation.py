"""An MCP server asks the user during a tool call, on the tool's card, in a real browser against
the real stack (Daphne, a Celery worker, Redis): a form filled in (a wrong value refused by the
server-side check first) and accepted, declined after a reload, cancelled; a page to open (its
domain shown, opened in a new tab) and Done. Two real servers: the SDK's in the 2026-07-28 era
(questions by `InputRequiredResult`) and npm @modelcontextprotocol/server-everything in the
handshake era (`elicitation/create`). Light, dark and phone screenshots; axe on the card."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register, seen_by_stack
from toolsets.mcp.discovery import refresh
from toolsets.models import ToolExecution, ToolsetConfig
from toolsets.registry import all_toolsets

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import SHOTS, browser_page, normalized_messages, send, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ASKING = ROOT / "tests/toolsets/mcp/elicitation_server.py"
EVERYTHING = ROOT / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    """Signed in, axe-ready; a form the server-side check refuses is a 400 the browser logs."""
    refused = "Failed to load resource: the server responded with a status of 400"
    with browser_page(browser, stack.url, bypass_csp=True, allow_console=(refused,)) as found:
        yield found


def _registered(slug: str, name: str, command: str, args: list[str]) -> None:
    server = register(name=name, slug=slug, transport="stdio", command=command, args=args)
    for _ in range(3):  # a busy machine may start a server slower than discovery waits
        if server.tools:
            return
        refresh(server, None)
        all_toolsets()
        server.refresh_from_db()
    assert server.tools, server.last_error


def add_server(slug: str, name: str, command: str, args: list[str]) -> None:
    # Off Playwright's thread, which runs its own event loop.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(_registered, slug, name, command, args).result()
    # The admin lets this server's tools run without asking: the card shows the question only.
    ToolsetConfig.objects.create(toolset_id=f"mcp_{slug}", policy="auto")
    seen_by_stack()


def select(page: Page, slug: str) -> None:
    send(page, "Hello")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    page.get_by_test_id("toolsets-popover-trigger").click()
    box = page.get_by_test_id(f"toolset-checkbox-mcp_{slug}")
    if not box.is_checked():
        box.check()
    expect(box).to_be_checked()
    page.keyboard.press("Escape")


def asked(page: Page, tool: str) -> Locator:
    send(page, f"use the {tool} tool")
    card = page.get_by_test_id("elicitation-card")
    expect(card).to_be_visible(timeout=30_000)
    return card


def field(card: Locator, label: str) -> Locator:
    return card.get_by_label(label, exact=True)


def content_of(record: ToolExecution) -> list[dict[str, Any]]:
    result: dict[str, Any] = record.result or {}
    return list(result["content"])


def result_text(page: Page) -> str:
    wait_turn_done(page)
    record = ToolExecution.objects.order_by("-pk").first()
    assert record is not None and record.status == "success", record and record.error
    return str(content_of(record)[0]["text"])


def test_a_form_is_filled_checked_and_accepted(page: Page, stack: Any) -> None:
    add_server("ask", "Asking", **forked(ASKING))
    page.goto(stack.url + "/")
    select(page, "ask")
    card = asked(page, "ask")
    tool_card = page.locator('[data-testid="tool-call-message"][data-status="waiting"]')
    expect(tool_card).to_contain_text("Needs your answer")
    expect(card).to_contain_text("Asking asks:")
    # The server's message, escaped: its script is text.
    expect(card.get_by_test_id("elicitation-message")).to_have_text(
        "Tell me about you <script>alert('message')</script>"
    )
    shot(page, "elicitation-form-light")
    expect(field(card, "Budget")).to_have_value("10.5")  # the schema's default
    expect(field(card, "Size")).to_have_value("m")
    expect(field(card, "Subscribe")).to_be_checked()
    expect(field(card, "Email (required)")).to_have_attribute("type", "email")
    expect(field(card, "Birthday")).to_have_attribute("type", "date")
    violations = blocking(axe_violations(page, '[data-testid="elicitation-card"]'))
    assert not violations, describe(violations, "elicitation card, light")

    field(card, "Your name (required)").fill("Ada Lovelace")
    field(card, "Email (required)").fill("not an email")
    field(card, "Age (required)").fill("12")
    field(card, "Birthday").fill("1815-12-10")
    field(card, "Colour (required)").select_option(label="Green")
    card.get_by_label("Egg").check()
    card.get_by_test_id("elicitation-accept").click()
    # Checked on the server: the errors by their fields, and the question stays open.
    box_id = str(card.get_attribute("id")).removeprefix("elicitation-")
    expect(card.locator(f"#elicit-{box_id}-field-1-error")).to_have_text("Enter a valid email address.")
    expect(field(card, "Age (required)")).to_have_attribute("aria-invalid", "true")
    expect(card).to_contain_text("Enter a number at least 18.")
    shot(page, "elicitation-form-errors")
    set_theme(page, "dark")
    shot(page, "elicitation-form-dark")
    violations = blocking(axe_violations(page, '[data-testid="elicitation-card"]'))
    assert not violations, describe(violations, "elicitation card with errors, dark")
    set_theme(page, "light")

    field(card, "Email (required)").fill("ada@example.com")
    field(card, "Age (required)").fill("36")
    card.get_by_test_id("elicitation-accept").click()
    done = page.locator('[data-testid="tool-call-message"][data-tool="toolset__mcp_ask__ask"]')
    expect(done).to_have_attribute("data-status", "success", timeout=30_000)
    text = result_text(page)
    assert text.startswith("mrtr accept: ")
    answer = json.loads(text.split(": ", 1)[1])
    assert answer == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "born": "1815-12-10",
        "age": 36,
        "budget": 10.5,
        "subscribe": True,
        "size": "m",
        "colour": "g",
        "toppings": ["egg"],
    }
    expect(page.get_by_test_id("elicitation-card")).to_have_count(0)
    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    again = normalized_messages(page)
    if again != live:
        (SHOTS / "elicitation-live.html").write_text(live)
        (SHOTS / "elicitation-reload.html").write_text(again)
    assert again == live


def test_a_reload_while_asked_shows_the_same_question_which_is_then_declined(page: Page, stack: Any) -> None:
    add_server("ask", "Asking", **forked(ASKING))
    page.goto(stack.url + "/")
    select(page, "ask")
    card = asked(page, "ask")
    before = card.inner_html()
    page.reload()
    wait_socket(page)
    card = page.get_by_test_id("elicitation-card")
    expect(card).to_be_visible()
    assert card.inner_html() == before
    card.get_by_test_id("elicitation-decline").click()
    expect(page.locator('[data-tool="toolset__mcp_ask__ask"]')).to_have_attribute(
        "data-status", "success", timeout=30_000
    )
    assert result_text(page) == "mrtr decline: null"


def test_a_page_to_open_shows_its_domain_opens_in_a_new_tab_and_done_goes_on(page: Page, stack: Any) -> None:
    add_server("ask", "Asking", **forked(ASKING))
    page.context.route("https://bank.example/**", lambda route: route.fulfill(body="<title>Bank</title>Signed in."))
    page.goto(stack.url + "/")
    select(page, "ask")
    card = asked(page, "visit")
    expect(card.get_by_test_id("elicitation-domain")).to_have_text("bank.example")
    expect(card.get_by_test_id("elicitation-url")).to_have_text("https://bank.example/login?next=/pay")
    link = card.get_by_test_id("elicitation-open")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    shot(page, "elicitation-url-light")
    violations = blocking(axe_violations(page, '[data-testid="elicitation-card"]'))
    assert not violations, describe(violations, "elicitation url card")
    with page.expect_popup() as opened:
        link.click()
    popup = opened.value
    popup.wait_for_load_state()
    assert popup.url == "https://bank.example/login?next=/pay"
    popup.close()
    # On a phone, after a reload: the same question, within the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    wait_socket(page)
    card = page.get_by_test_id("elicitation-card")
    expect(card.get_by_test_id("elicitation-domain")).to_have_text("bank.example")
    card.scroll_into_view_if_needed()
    shot(page, "elicitation-url-phone")
    box = card.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    card.get_by_test_id("elicitation-accept").click()
    expect(page.locator('[data-tool="toolset__mcp_ask__visit"]')).to_have_attribute(
        "data-status", "success", timeout=30_000
    )
    assert result_text(page) == "mrtr accept: null"


@pytest.mark.skipif(not EVERYTHING.exists(), reason="npm ci first")
def test_the_everything_servers_form_in_the_handshake_era(page: Page, stack: Any) -> None:
    add_server("ev", "Everything", shutil.which("node") or "node", [str(EVERYTHING), "stdio"])
    page.goto(stack.url + "/")
    select(page, "ev")
    send(page, "use the trigger-elicitation-request tool")
    card = page.get_by_test_id("elicitation-card")
    expect(card).to_be_visible(timeout=30_000)
    expect(field(card, "Legacy Titled Single Select Enum")).to_have_value("pet-1")
    expect(card.get_by_label("Guitar")).to_be_checked()
    expect(field(card, "Integer")).to_have_value("42")
    card.scroll_into_view_if_needed()
    shot(page, "elicitation-everything-form", full_page=True)
    violations = blocking(axe_violations(page, '[data-testid="elicitation-card"]'))
    assert not violations, describe(violations, "everything server's form")
    field(card, "String (required)").fill("Grace Hopper")
    card.get_by_test_id("elicitation-accept").click()
    expect(page.locator('[data-testid="tool-call-message"]').last).to_have_attribute(
        "data-status", "success", timeout=30_000
    )
    wait_turn_done(page)
    record = ToolExecution.objects.order_by("-pk").first()
    assert record is not None
    text = "\n".join(b.get("text", "") for b in content_of(record))
    assert "- Name: Grace Hopper" in text and '"untitledMultipleSelectEnum": [\n      "Guitar"\n    ]' in text


@pytest.mark.skipif(not EVERYTHING.exists(), reason="npm ci first")
def test_cancel_in_the_handshake_era(page: Page, stack: Any) -> None:
    add_server("ev", "Everything", shutil.which("node") or "node", [str(EVERYTHING), "stdio"])
    page.goto(stack.url + "/")
    select(page, "ev")
    send(page, "use the trigger-elicitation-request tool")
    card = page.get_by_test_id("elicitation-card")
    expect(card).to_be_visible(timeout=30_000)
    card.get_by_test_id("elicitation-cancel").click()
    expect(page.locator('[data-testid="tool-call-message"]').last).to_have_attribute(
        "data-status", "success", timeout=30_000
    )
    wait_turn_done(page)
    record = ToolExecution.objects.order_by("-pk").first()
    assert record is not None
    assert "User cancelled the elicitation dialog" in content_of(record)[0]["text"]
