"""The chat as a person uses it: headless Chromium against Daphne + a real Celery worker."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat.models import Chat, LLMModel, Message, Turn
from chat.rendering import render_text

from .conftest import normalized_messages, send, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

TRACK_CARD_STATES = """() => {
  window.__cardStates = [];
  new MutationObserver(() => {
    document.querySelectorAll('[data-testid=tool-call-message]').forEach(c => {
      const s = c.id + ':' + c.dataset.status;
      if (!window.__cardStates.includes(s)) window.__cardStates.push(s);
    });
  }).observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def start_chat(page: Page, text: str) -> None:
    send(page, text)
    page.wait_for_url("**/chats/*/")
    wait_socket(page)


def test_tool_calls_stream_then_reload_is_identical(page: Page, e2e_user: Any, demo_model: LLMModel) -> None:
    # The cards' states are watched from before the message is sent, on an open socket, and the
    # arguments stream slowly enough that even a sync (fragments that beat the Send's response)
    # finds each card still working: starting from the home page, a busy machine could load the
    # chat's page after the tools had run.
    demo_model.extra_params = {"tokens_per_second": 20}
    demo_model.save()
    chat = Chat.objects.create(
        owner=e2e_user, model=demo_model, enabled_tools={"clock_math": ["current_time", "calculate"]}
    )
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    page.evaluate(TRACK_CARD_STATES)
    send(page, "What time is it in Tokyo, and what is 12*7?")
    cards = page.get_by_test_id("tool-call-message")
    expect(cards).to_have_count(2, timeout=15_000)
    wait_turn_done(page)
    expect(cards.nth(0)).to_have_attribute("data-status", "success")
    expect(cards.nth(1)).to_have_attribute("data-status", "success")
    expect(cards.nth(0)).to_contain_text("Current time")
    expect(cards.nth(1)).to_contain_text("Calculate")
    states = page.evaluate("window.__cardStates")
    # Each card was seen working before it was seen done (spinner → check).
    for card_id in {s.split(":")[0] for s in states}:
        seen = [s.split(":")[1] for s in states if s.startswith(card_id + ":")]
        assert seen[-1] == "success" and any(s in ("pending", "calling") for s in seen[:-1]), states
    answer = page.locator(".turn .md").last
    expect(answer).to_contain_text("84")
    expect(answer).to_contain_text("Tokyo")
    shot(page, "chat-tools-light")
    before = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == before
    turn = Turn.objects.get()
    assert turn.status == Turn.Status.COMPLETED
    roles = list(Message.objects.filter(turn=turn).values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]


def test_reload_mid_turn_has_no_gap_and_no_duplicate(page: Page) -> None:
    start_chat(page, "[demo:slow] Tell me about websockets.")
    tail = page.locator(".turn .md").last
    page.wait_for_function("() => (document.querySelector('.turn .md')?.innerText || '').length > 80", timeout=15_000)
    page.reload()
    wait_socket(page)
    seen_after_reload = tail.inner_text()
    assert len(seen_after_reload) > 40  # the reload shows what was already streamed
    wait_turn_done(page, timeout=60_000)
    final_live = normalized_messages(page)
    stored = Message.objects.filter(role="assistant").last()
    assert stored is not None
    live_blocks = page.inner_html(f"#blocks-{stored.turn_id}-0")
    live_text = tail.inner_text()
    words = " ".join(seen_after_reload.split())
    assert " ".join(live_text.split()).startswith(words[: len(words) - 20])
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == final_live
    # Nothing doubled and nothing lost: what streamed in equals the stored message rendered.
    assert live_blocks == "".join(render_text(stored.content, complete=True).blocks)
    assert stored.content.count("A longer answer") == 1


def test_stop_mid_turn_keeps_partial_answer(page: Page) -> None:
    start_chat(page, "[demo:slow] Explain the history of the web in detail.")
    page.wait_for_function("() => (document.querySelector('.turn .md')?.innerText || '').length > 40", timeout=15_000)
    stop_button = page.get_by_test_id("stop-button")
    expect(stop_button).to_be_visible()
    clicked = time.monotonic()
    stop_button.click()
    expect(page.locator(".stopped-label")).to_be_visible(timeout=3_000)
    stopped_after = time.monotonic() - clicked
    text_at_stop = page.locator(".turn .md").last.inner_text()
    time.sleep(0.8)
    assert page.locator(".turn .md").last.inner_text() == text_at_stop  # nothing streams after Stop
    expect(page.get_by_test_id("send-button")).to_be_visible()
    turn = Turn.objects.get()
    assert turn.status == Turn.Status.CANCELLED
    partial = Message.objects.get(turn=turn, role="assistant")
    assert partial.metadata == {"stopped": True} and len(partial.content) > 20
    # The slow answer streams for a minute: Stop ends it in a moment even on a loaded two-core
    # machine (the latency itself is a benchmark figure, not a test's).
    assert stopped_after < 6.0, f"Stop took {stopped_after:.2f} s"
    page.reload()
    expect(page.locator(".stopped-label")).to_be_visible()
    assert page.locator(".turn .md").last.inner_text().strip() == text_at_stop.strip()


def test_escape_stops_the_turn(page: Page) -> None:
    start_chat(page, "[demo:slow] Write a long essay.")
    page.wait_for_function("() => (document.querySelector('.turn .md')?.innerText || '').length > 20")
    page.keyboard.press("Escape")
    expect(page.locator(".stopped-label")).to_be_visible(timeout=3_000)


def test_provider_error_is_shown_and_message_kept(page: Page) -> None:
    start_chat(page, "[demo:fail-before] hello")
    wait_turn_done(page)
    expect(page.locator(".turn-error")).to_contain_text("Could not finish this answer")
    expect(page.locator(".msg-user")).to_contain_text("[demo:fail-before] hello")
    assert Turn.objects.get().status == Turn.Status.FAILED
    page.reload()
    expect(page.locator(".msg-user")).to_contain_text("[demo:fail-before] hello")


def test_sidebar_rename_and_delete(page: Page) -> None:
    start_chat(page, "What is 2+2?")
    wait_turn_done(page)
    item = page.locator(".chat-link").first
    item.locator("summary").click()
    item.locator("input[name=title]").fill("Arithmetic")
    item.get_by_role("button", name="Rename").click()
    expect(page.locator(".chat-link").first.locator("> a")).to_have_text("Arithmetic")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(".chat-link").first.locator("summary").click()
    page.locator(".chat-link").first.get_by_role("button", name="Delete chat").click()
    page.wait_for_url(page.base_url + "/")  # type: ignore[attr-defined]
    expect(page.locator(".chat-list-empty")).to_be_visible()


@pytest.mark.parametrize(
    ("name", "viewport", "scheme"),
    [
        ("desktop-light", {"width": 1280, "height": 860}, "light"),
        ("desktop-dark", {"width": 1280, "height": 860}, "dark"),
        ("phone-light", {"width": 375, "height": 740}, "light"),
        ("phone-dark", {"width": 375, "height": 740}, "dark"),
    ],
)
def test_chat_page_looks_finished(page: Page, name: str, viewport: Any, scheme: Any) -> None:
    page.set_viewport_size(viewport)
    page.emulate_media(color_scheme=scheme)
    start_chat(page, "What time is it in Tokyo, and what is 12*7?")
    wait_turn_done(page)
    send_and_wait(page, "Show me a markdown sample with **bold**, a list and `code`.")
    # Nothing may overflow the viewport horizontally at phone width.
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    shot(page, f"chat-{name}")


def test_a_long_chat_loads_earlier_exchanges_when_scrolled_to_the_top(page: Page, e2e_user: Any) -> None:
    from chat.exchanges import PAGE_TURNS
    from chat.models import Chat

    chat = Chat.objects.create(owner=e2e_user, title="A long conversation")
    total = PAGE_TURNS + 7  # less than a page more: one scroll to the top loads them all
    for i in range(total):
        turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
        Message.objects.create(chat=chat, turn=turn, role="user", content=f"Question number {i}")
        Message.objects.create(chat=chat, turn=turn, step=0, role="assistant", content=f"Answer **{i}**, in full.")

    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    expect(page.locator(".msg-user").last).to_contain_text(f"Question number {total - 1}")
    assert page.locator(".turn").count() == PAGE_TURNS
    oldest_shown = page.locator(".turn").first.get_attribute("id")

    page.eval_on_selector("#scroller", "s => { s.scrollTop = 0; }")
    expect(page.locator(".turn")).to_have_count(total)
    expect(page.get_by_test_id("load-earlier")).to_have_count(0)
    expect(page.locator(".msg-user").first).to_contain_text("Question number 0")
    # The reader stays where they were: the exchange that was on top is still in view.
    top = page.eval_on_selector(
        f"#{oldest_shown}", "el => el.getBoundingClientRect().top - el.closest('#scroller').getBoundingClientRect().top"
    )
    assert 0 <= top < 400, top
    expect(page.locator(".md").first).to_contain_text("Answer 0, in full.")
    shot(page, "chat-earlier-loaded")


def long_chat(owner: Any, turns: int) -> int:
    """A chat of `turns` finished exchanges, each answer long enough that a few fill the window."""
    from chat.models import Chat

    chat = Chat.objects.create(owner=owner, title="A long conversation")
    for i in range(turns):
        turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
        Message.objects.create(chat=chat, turn=turn, role="user", content=f"Question number {i}")
        answer = f"Answer **{i}**.\n\n" + "\n\n".join(f"Paragraph {n} of answer {i}." for n in range(6))
        Message.objects.create(chat=chat, turn=turn, step=0, role="assistant", content=answer)
    return int(chat.pk)


def test_a_long_chat_opens_at_its_latest_message(page: Page, e2e_user: Any) -> None:
    from chat.exchanges import PAGE_TURNS

    chat_id = long_chat(e2e_user, PAGE_TURNS + 3)
    page.goto(f"{page.base_url}/chats/{chat_id}/")  # type: ignore[attr-defined]
    # Scrolled in the frame after DOMContentLoaded (chat.js), to the very bottom.
    at_bottom = "() => { const s = document.getElementById('scroller');"
    page.wait_for_function(at_bottom + " return s.scrollHeight - s.scrollTop - s.clientHeight < 2; }")
    last = page.locator(".msg-user").last
    expect(last).to_contain_text(f"Question number {PAGE_TURNS + 2}")
    expect(last).to_be_in_viewport()
    expect(page.locator(".turn").first).not_to_be_in_viewport()
    assert page.evaluate("document.activeElement.id") == "composer-input"  # the desktop window focuses the box


def test_htmx_sets_up_two_forms_per_exchange_not_each_button(page: Page, e2e_user: Any) -> None:
    """The start-up cost of a long chat's page grows with what htmx sets up per exchange: its
    edit and regenerate forms, not each of their buttons (bench/RESULTS.md, Lighthouse)."""
    from chat.exchanges import PAGE_TURNS

    count = """() => [...document.querySelectorAll('*')].filter(e => {
        const d = e['htmx-internal-data']; return d && d.firstInitCompleted && e.closest('#messages');
    }).length"""
    page.goto(f"{page.base_url}/chats/{long_chat(e2e_user, 1)}/")  # type: ignore[attr-defined]
    wait_socket(page)
    one = page.evaluate(count)
    page.goto(f"{page.base_url}/chats/{long_chat(e2e_user, PAGE_TURNS)}/")  # type: ignore[attr-defined]
    wait_socket(page)
    many = page.evaluate(count)
    assert one > 0
    assert many - one <= 2 * (PAGE_TURNS - 1), (one, many)


def test_a_turn_that_missed_its_last_fragment_is_corrected_by_a_sync(page: Page) -> None:
    start_chat(page, "What is 12*7?")
    wait_turn_done(page)
    finished = page.inner_html("#messages")
    # As if the fragment that ended the turn never arrived: the page still shows it running.
    page.eval_on_selector(
        ".turn:last-of-type",
        """t => { const s = t.querySelector('.turn-state');
                  t.dataset.seq = String(Number(t.dataset.seq) - 1);
                  s.dataset.turnStatus = 'running'; s.innerHTML = '<div class="thinking"></div>'; }""",
    )
    expect(page.locator('.turn-state[data-turn-status="running"]')).to_have_count(1)

    expect(page.locator('.turn-state[data-turn-status="completed"]')).to_have_count(1, timeout=20_000)
    assert "84" in page.inner_html("#messages")
    assert page.locator(".thinking").count() == 0
    assert finished.count("tool-card") == page.inner_html("#messages").count("tool-card")
