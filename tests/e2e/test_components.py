"""Readable tool cards and generative UI components, as a user sees them with the demo model."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from chat import citations
from chat.models import Message
from chat.rendering import render_text
from toolsets.models import ToolExecution
from toolsets.workspace.models import Task

from .conftest import SHOTS, normalized_messages, send, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

TRACK_PLACEHOLDER = """() => {
  window.__sawPlaceholder = false;
  new MutationObserver(() => {
    if (document.querySelector('.md-tail .gen-ui-placeholder')) window.__sawPlaceholder = true;
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def set_up_workspace(page: Page) -> None:
    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    expect(page.get_by_test_id("toolset-status-workspace")).to_have_text("Configure in Toolsets settings")
    page.get_by_test_id("toolset-setup-workspace").click()
    expect(page.get_by_test_id("toolset-status-workspace")).to_have_text("Ready")


def test_stale_tasks_card_placeholder_and_task_table(page: Page) -> None:
    set_up_workspace(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.evaluate(TRACK_PLACEHOLDER)
    send(page, "Summarize stale tasks across projects")
    page.wait_for_url("**/chats/*/")
    page.evaluate(TRACK_PLACEHOLDER)
    card = page.get_by_test_id("tool-call-message").first
    expect(card).to_contain_text("Workspace: List tasks", timeout=15_000)
    expect(card).to_have_attribute("data-status", "success", timeout=15_000)
    expect(card.get_by_test_id("tool-call-summary")).to_contain_text("tasks from")
    table = page.locator(".gen-ui-task_table")
    expect(table).to_be_visible(timeout=30_000)
    wait_turn_done(page)
    assert page.evaluate("window.__sawPlaceholder"), "no placeholder was shown while the block streamed"
    expect(table.locator("table")).to_be_visible()
    expect(table.locator("tbody tr").first).to_be_visible()
    stored = Message.objects.filter(role="assistant").last()
    assert stored is not None and ':::component{type="task_table"}' in stored.content
    assert stored.turn_id is not None
    live_blocks = page.inner_html(f"#blocks-{stored.turn_id}-{stored.step}")
    # The stream sent the stored text's blocks, with its citations linked to the Sources list.
    cite = citations.by_number(
        citations.from_executions(ToolExecution.objects.filter(turn_id=stored.turn_id)), stored.turn_id
    )
    assert live_blocks == "".join(citations.link(b, cite) for b in render_text(stored.content, complete=True).blocks)
    assert 'class="cite"' in live_blocks
    before = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == before
    shot(page, "component-task-table-in-chat")


QUESTIONS = [
    ("task_table", "Summarize stale tasks across projects"),
    ("calendar_events", "What's on my calendar this week?"),
    ("email_summary", "Any unread emails?"),
    ("meeting_summary", "Summarize yesterday's meeting"),
    ("social_post", "Draft a LinkedIn post about our launch"),
    ("task_card", "Show task {task_id}"),
]


def test_every_component_in_light_dark_desktop_and_phone(page: Page) -> None:
    set_up_workspace(page)
    task = Task.objects.order_by("id").first()
    assert task is not None
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, QUESTIONS[0][1])
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page, timeout=60_000)
    for kind, question in QUESTIONS[1:]:
        if kind == "social_post":
            # Drafting a post is a tool with side effects: the reader approves it on its card.
            send(page, question)
            page.get_by_test_id("approval-approve").click(timeout=30_000)
            wait_turn_done(page, timeout=60_000)
            continue
        send_and_wait(page, question.format(task_id=task.pk), timeout=60_000)
    for kind, _ in QUESTIONS:
        expect(page.locator(f".gen-ui-{kind}").first).to_be_visible()
    assert page.locator(".gen-ui-invalid, .gen-ui-error").count() == 0
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, height, label in ((1280, 900, "desktop"), (375, 760, "phone")):
            page.set_viewport_size({"width": width, "height": height})
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"horizontal overflow at {width}px"
            for kind, _ in QUESTIONS:
                element = page.locator(f".gen-ui-{kind}").first
                element.scroll_into_view_if_needed()
                SHOTS.mkdir(parents=True, exist_ok=True)
                element.screenshot(path=str(SHOTS / f"component-{kind}-{scheme}-{label}.png"))
