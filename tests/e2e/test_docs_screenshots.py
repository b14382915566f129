"""The documentation's screenshots (docs/images/, the README's too), taken from the real stack
with the demo model, so the docs show Tessera as it is today.

`make docs` runs this module with TESSERA_DOCS_IMAGES=docs/images and then builds the site; in
`make test` the same pictures go to the run's screenshots folder, so a change that breaks a
documented screen fails here. Every picture the docs use is listed in IMAGES (tests/docs checks
that the docs use no other), and each test checks that its screen shows what the docs say.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Locator, Page, expect

from chat.models import Chat, LLMModel, Message
from tests.processes import Processes, free_port
from tests.toolsets.files import samples
from toolsets.mcp.setup import EXAMPLE_SCRIPT
from toolsets.workspace.sample_data import seed_for_user

from .axe import set_theme
from .conftest import PASSWORD, SHOTS, browser_page, login, send, send_and_wait, wait_socket, wait_turn_done
from .test_operations import _activity
from .test_spend_chart import make_ledger

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

OUT = Path(os.environ.get("TESSERA_DOCS_IMAGES") or SHOTS / "docs")

# name → what it shows (and where the docs use it).
IMAGES = {
    "chat-light": "A chat: tool cards, a task table and citations (README, home page)",
    "chat-dark": "The same chat in the dark theme (home page)",
    "tool-card-open": "An opened tool card: arguments, result, duration (user guide)",
    "chat-settings": "A new chat's settings panel (user guide)",
    "tools-popover": "The composer's tools popover (user guide)",
    "versions": "An edited question with its versions, 2 / 2 (user guide)",
    "search": "Search as you type in the sidebar (user guide)",
    "approval-card": "A tool call waiting for approval (user guide, policies)",
    "elicitation-card": "An MCP server's question on a tool card, as a form (user guide)",
    "delegation": "A subagent's delegation card with nested tool cards (user guide)",
    "files": "Files attached to a question, with the answer citing them (user guide)",
    "toolsets-page": "The Toolsets settings page (user guide, admin guide)",
    "account": "The account page (user guide)",
    "admin-add-model": "Django admin: adding an LLM model (admin guide)",
    "admin-mcp-server": "Django admin: an MCP server saved and connected (admin guide)",
    "admin-mcp-tools": "Django admin: the tools an MCP server lists (admin guide)",
    "admin-tool-policies": "Django admin: tool policies (admin guide)",
    "admin-overview": "Admin → Operations, the staff overview (operations)",
    "admin-spend-chart": "Django admin: spend over time, per day and user (admin guide, teams)",
}


def picture(target: Page | Locator, name: str, *, full_page: bool = False) -> Path:
    assert name in IMAGES, f"add {name!r} to IMAGES"
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.png"
    if isinstance(target, Page):
        target.screenshot(path=str(path), full_page=full_page, animations="disabled", caret="hide")
    else:
        target.screenshot(path=str(path), animations="disabled", caret="hide")
    return path


def settle(page: Page) -> None:
    """Transitions finished and the latest message in view, as a reader would look at it."""
    # Finite ones: a spinner's never ends.
    page.evaluate("() => document.getAnimations().forEach((a) => { try { a.finish(); } catch (e) {} })")
    page.wait_for_timeout(150)


def workspace_ready(page: Page) -> None:
    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    page.get_by_test_id("toolset-setup-workspace").click()
    expect(page.get_by_test_id("toolset-status-workspace")).to_have_text("Ready")


def test_a_chat_with_tool_cards_components_and_citations(page: Page) -> None:
    workspace_ready(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "What time is it in Tokyo, and what is 12*7?")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    send_and_wait(page, "Summarize stale tasks across projects", timeout=60_000)
    turn = page.locator(".turn").last
    expect(turn.locator(".gen-ui-task_table")).to_be_visible()
    expect(turn.get_by_test_id("tool-call-message").first).to_have_attribute("data-status", "success")
    expect(turn.locator("sup.cite").first).to_be_visible()
    expect(turn.get_by_test_id("source").first).to_be_visible()
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.evaluate("() => { document.querySelector('.messages-scroll').scrollTop = 0; }")
    settle(page)
    picture(page, "chat-light")
    set_theme(page, "dark")
    picture(page, "chat-dark")
    set_theme(page, "light")

    # An opened card: what was sent, what came back, how long it took.
    first_turn = page.locator(".turn").first
    first_turn.scroll_into_view_if_needed()
    card = first_turn.get_by_test_id("tool-call-message").first
    card.locator("summary").first.click()
    expect(card.locator(".tc-body")).to_be_visible()
    expect(card.locator(".tc-body")).to_contain_text("Result")
    expect(card.locator(".tc-meta")).to_contain_text("Took")
    settle(page)
    picture(card, "tool-card-open")


def test_a_new_chats_settings_and_tools(page: Page) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.get_by_role("button", name="Chat settings").click()
    panel = page.get_by_test_id("settings-panel")
    expect(panel).to_be_visible()
    expect(page.get_by_test_id("settings-model-name")).to_have_text("Demo (offline)")
    settle(page)
    picture(page, "chat-settings")
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()

    page.get_by_test_id("toolsets-popover-trigger").click()
    expect(page.get_by_test_id("toolsets-popover-content")).to_be_visible()
    page.get_by_test_id("toolset-expand-clock_math").click()
    expect(page.get_by_test_id("tool-checkbox-clock_math-calculate")).to_be_visible()
    expect(page.get_by_test_id("toolsets-popover-content")).to_contain_text("Exa")
    settle(page)
    picture(page, "tools-popover")


def test_an_edited_question_and_its_versions(page: Page) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "What is 12*7?")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    question = page.locator(".msg-user").first
    question.get_by_role("button", name="Edit message").click()
    question.get_by_test_id("edit-input").fill("What is 12*8?")
    question.get_by_test_id("edit-input").press("Enter")
    label = page.locator(".msg-user").first.get_by_test_id("version-label")
    expect(label).to_have_text("2 / 2")
    wait_turn_done(page)
    expect(page.locator(".turn").last).to_contain_text("96")
    settle(page)
    picture(page, "versions")


def test_searching_chats(page: Page, e2e_user: Any) -> None:
    for title, texts in (
        ("Trip planning", ["Which temples should we see in Kyoto?", "Kinkaku-ji and Fushimi Inari in Kyoto."]),
        ("Kyoto food", ["Where to eat in Kyoto?", "Nishiki market, for a start."]),
        ("Q3 budget", ["Plan the webinar budget", "Here is a plan."]),
    ):
        chat = Chat.objects.create(owner=e2e_user, title=title)
        for i, text in enumerate(texts):
            Message.objects.create(chat=chat, role="user" if i % 2 == 0 else "assistant", content=text)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.locator("#chat-title").click()
    page.keyboard.press("/")
    page.keyboard.type("kyo")
    hits = page.locator("#chat-search-results a[data-search-hit]")
    expect(hits).to_have_count(2)
    expect(hits.first.locator("mark").first).to_be_visible()
    settle(page)
    picture(page, "search")


def test_a_tool_call_waiting_for_approval(page: Page, e2e_user: Any) -> None:
    seed_for_user(e2e_user)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, 'Create a task "Book the venue" in Website relaunch, due 2026-12-01, high priority')
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    card = page.get_by_test_id("approval-card")
    expect(card).to_be_visible(timeout=20_000)
    expect(card).to_contain_text("Allow Workspace: Create task to run")
    card.scroll_into_view_if_needed()
    settle(page)
    picture(page, "approval-card")
    page.get_by_test_id("approval-deny").click()
    wait_turn_done(page)


def test_a_servers_question_on_a_tool_card(page: Page) -> None:
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from tests.toolsets.mcp.conftest import register, seen_by_stack
    from toolsets.models import ToolsetConfig

    with ThreadPoolExecutor(1) as thread:  # off Playwright's thread, which runs its own loop
        asking = ROOT / "tests/toolsets/mcp/elicitation_server.py"
        thread.submit(
            register, name="Shop", slug="shop", transport="stdio", command=sys.executable, args=[str(asking)]
        ).result()
    ToolsetConfig.objects.create(toolset_id="mcp_shop", policy="auto")
    seen_by_stack()
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "Hello")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)
    page.get_by_test_id("toolsets-popover-trigger").click()
    box = page.get_by_test_id("toolset-checkbox-mcp_shop")
    if not box.is_checked():
        box.check()
    page.keyboard.press("Escape")
    send(page, "use the order tool")
    card = page.get_by_test_id("elicitation-card")
    expect(card).to_be_visible(timeout=30_000)
    expect(card).to_contain_text("Who is the order for, and how many?")
    card.get_by_label("Name on the order (required)").fill("Ada Lovelace")
    settle(page)
    picture(page.locator('[data-testid="tool-call-message"][data-status="waiting"]'), "elicitation-card")
    card.get_by_test_id("elicitation-cancel").click()
    wait_turn_done(page)


def test_a_subagent_at_work(page: Page) -> None:
    workspace_ready(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "Plan my week from my calendar and tasks")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page, 60_000)
    card = page.locator('[data-tool-card][data-tool="delegate_to_workspace_assistant"]').first
    expect(card).to_have_attribute("data-status", "success")
    card.locator("summary").first.click()
    expect(card.locator("[data-testid=delegation] [data-tool-card]")).to_have_count(2)
    expect(card.get_by_test_id("delegation-done")).to_have_text("Workspace assistant finished.")
    page.evaluate("() => { document.querySelector('.messages-scroll').scrollTop = 0; }")
    settle(page)
    picture(page, "delegation")


def test_files_attached_to_a_question(page: Page, e2e_user: Any, tmp_path: Path) -> None:
    chat = Chat.objects.create(owner=e2e_user, enabled_tools={})
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    report = tmp_path / "report.pdf"
    report.write_bytes(samples.pdf(["Quarterly report. Revenue grew by 12 percent.", "Costs stayed flat."]))
    chart = tmp_path / "chart.png"
    chart.write_bytes(samples.image(size=(240, 160), colour=(40, 90, 220)))
    with page.expect_file_chooser() as chooser:
        page.click('[data-testid="attach-button"]')
    chooser.value.set_files([str(report), str(chart)])
    for name in ("report.pdf", "chart.png"):
        chip = page.locator('[data-testid="attach-chip"]', has_text=name)
        expect(chip).to_have_class("file-chip is-ready", timeout=20_000)
    page.fill("#composer-input", "Summarize the attached file")
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-testid="message-files"]')
    wait_turn_done(page, 60_000)
    answer = page.locator(".turn").last
    expect(answer).to_contain_text("report.pdf (pages 1–2 of 2) in short")
    expect(answer.locator("sup.cite a")).to_have_count(1)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.file-thumb')]
                 .every((i) => i.complete && i.naturalWidth > 0)"""
    )
    settle(page)
    picture(page, "files")


def test_the_toolsets_and_account_pages(page: Page) -> None:
    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    expect(page.get_by_test_id("toolset-status-exa")).to_have_text("API key not configured")
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text("Ready")
    settle(page)
    picture(page, "toolsets-page", full_page=True)

    page.goto(page.base_url + "/account/")  # type: ignore[attr-defined]
    expect(page.get_by_role("heading", name="Password")).to_be_visible()
    settle(page)
    picture(page, "account")


@pytest.fixture
def admin_page(browser: Browser, stack: Any, e2e_user: Any, tmp_path: Path) -> Iterator[Page]:
    """Signed in as a superuser, on a web process of its own (same database and Redis): a web
    process caches content type ids, which the database flush between tests renumbers, so the
    admin saves here must not leave the shared stack's web process with ids a later test's
    admin saves would trip over."""
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    processes = Processes(tmp_path / "web", redis_url=settings.REDIS_URL)
    port = free_port()
    processes.web(port, DEBUG="true")
    try:
        base_url = f"http://127.0.0.1:{port}"
        with browser_page(browser, base_url, signed_in=False, viewport={"width": 1440, "height": 900}) as page:
            login(page, base_url, "root")
            yield page
    finally:
        processes.close()


def test_the_admin_screens(admin_page: Page, e2e_user: Any) -> None:
    page = admin_page
    base = page.base_url  # type: ignore[attr-defined]

    page.goto(base + "/admin/chat/llmmodel/add/")
    page.fill("#id_name", "GPT-4o mini")
    page.fill("#id_model", "openai/gpt-4o-mini")
    expect(page.locator("#id_api_key")).to_be_visible()
    settle(page)
    picture(page, "admin-add-model", full_page=True)

    page.goto(base + "/admin/mcp/mcpserver/add/")
    page.fill("#id_name", "Converter")
    page.fill("#id_slug", "conv")
    page.select_option("#id_transport", "stdio")
    # As an admin of a `make run` checkout would type it: web and workers run in the checkout.
    page.fill("#id_command", ".venv/bin/python")
    page.fill("#id_args", json.dumps([str(EXAMPLE_SCRIPT.relative_to(ROOT))]))
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("connected to", timeout=30_000)
    tools = page.locator("fieldset", has=page.locator("h2", has_text="Tools"))
    expect(tools).to_contain_text("list_units")
    settle(page)
    connection = page.locator("fieldset", has=page.locator("h2", has_text="Connection")).bounding_box()
    assert connection is not None
    OUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(
        path=str(OUT / "admin-mcp-server.png"),
        clip={"x": 0, "y": 0, "width": 1440, "height": connection["y"] + connection["height"] + 16},
        full_page=True,
        animations="disabled",
        caret="hide",
    )
    picture(tools, "admin-mcp-tools")

    page.goto(base + "/admin/toolsets/toolrule/")
    expect(page.locator("#result_list")).to_contain_text("create_task")
    # A wide list: a wide window, and the navigation sidebar folded away.
    page.set_viewport_size({"width": 1680, "height": 900})
    page.locator("#toggle-nav-sidebar").click()
    page.evaluate("() => window.scrollTo(0, 0)")
    expect(page.locator("#result_list thead")).to_contain_text("Circuit breaker")
    settle(page)
    picture(page, "admin-tool-policies")

    page.set_viewport_size({"width": 1440, "height": 900})
    _activity(e2e_user, LLMModel.objects.get(model="demo/tessera"))
    page.goto(base + "/admin/overview/")
    expect(page.get_by_role("heading", name="Turns by outcome")).to_be_visible()
    expect(page.locator("#ops-workers")).not_to_have_text("Workers alive: 0")
    settle(page)
    picture(page, "admin-overview", full_page=True)


def test_the_spend_chart(browser: Browser, stack: Any, e2e_user: Any) -> None:
    # The stack's own web process: this page saves nothing (see admin_page).
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    make_ledger(e2e_user)
    with browser_page(browser, stack.url, signed_in=False, viewport={"width": 1440, "height": 900}) as page:
        page.goto(stack.url + "/admin/login/?next=/admin/chat/spend/chart/")
        page.fill("#id_username", "root")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page.get_by_role("img", name="Cost in USD per day, by user")).to_be_visible()
        expect(page.get_by_test_id("spend-chart-legend")).to_contain_text("dora")
        settle(page)
        picture(page, "admin-spend-chart")
