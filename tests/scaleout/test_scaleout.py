"""Two web processes and two workers on PostgreSQL and Redis, with pages in headless Chromium:
a turn streams to every web process, Stop works from any of them on any worker, a killed worker's
turn is closed by the other one, and rolling restarts of the web processes lose no text.

A turn is sent from a page on one web process; the chat is then opened on the other, whose
socket gets the turn's live state and everything it streams from then on."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat.models import Chat, LLMModel, Message, Turn
from chat.rendering import render_text
from demo.answers import SLOW_TEXT
from tests.e2e.conftest import normalized_messages, send, wait_socket, wait_turn_done

from .cluster import WEBS, Cluster
from .conftest import SignedIn, visit

# The first test also starts the four processes (most of a minute on a busy machine).
pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(300)]

ANSWER = ".turn .md"
# The turn is running and its answer shows more than `chars` characters.
RUNNING_WITH_TEXT = """(chars) => {
  const state = [...document.querySelectorAll('.turn-state')].pop();
  const answer = [...document.querySelectorAll('.turn .md')].pop();
  return state && state.dataset.turnStatus === 'running' && answer && answer.innerText.length > chars;
}"""


def _chat(owner: Any, tokens_per_second: float) -> Chat:
    """A chat with the demo model at a pace of its own: the `[demo:slow]` answer is 317 tokens."""
    model = LLMModel.objects.create(
        name=f"Demo at {tokens_per_second:g} tokens/s",
        model="demo/tessera",
        enabled=True,
        extra_params={"tokens_per_second": tokens_per_second},
    )
    return Chat.objects.create(owner=owner, model=model, enabled_tools={})


def _send_then_open_elsewhere(pages: dict[str, Page], chat: Chat, sent_on: str, text: str) -> None:
    """Sends `text` from the chat on `sent_on`, then opens the chat on the other web processes."""
    visit(pages[sent_on], chat.pk)
    send(pages[sent_on], text)
    pages[sent_on].wait_for_selector(".turn")
    for web, page in pages.items():
        if web != sent_on:
            visit(page, chat.pk)


def _answer(chat: Chat) -> tuple[Turn, Message]:
    turn = Turn.objects.get(chat=chat)
    return turn, Message.objects.get(turn=turn, role=Message.Role.ASSISTANT)


def _text(page: Page) -> str:
    return page.locator(ANSWER).last.inner_text()


def _words(text: str) -> str:
    return " ".join(text.split())


def _as_stored(page: Page, message: Message) -> None:
    """The page shows exactly the stored answer: the stored text rendered whole, and all of the
    chat as a fresh load renders it from the database."""
    live = normalized_messages(page)
    assert page.inner_html(f"#blocks-{message.turn_id}-{message.step}") == "".join(
        render_text(message.content, complete=True).blocks
    )
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == live


def test_a_turn_sent_through_one_web_process_streams_to_a_page_on_the_other(
    running: Cluster, signed_in: SignedIn, e2e_user: Any
) -> None:
    chat = _chat(e2e_user, 30)  # about 11 s
    pages = {web: signed_in(web) for web in WEBS}
    _send_then_open_elsewhere(pages, chat, "web-1", "[demo:slow] Tell me a long story.")
    watcher = pages["web-2"]
    # The answer keeps arriving on web-2's socket, piece by piece, while the turn runs.
    at_open = len(_text(watcher))
    watcher.wait_for_function(RUNNING_WITH_TEXT, arg=at_open + 40, timeout=15_000)
    assert len(_text(watcher)) < len(SLOW_TEXT) - 200
    wait_turn_done(watcher, 30_000)
    wait_turn_done(pages["web-1"], 5_000)

    turn, answer = _answer(chat)
    assert turn.status == Turn.Status.COMPLETED, (turn.status, turn.error)
    assert answer.content.strip() == SLOW_TEXT.strip()
    assert len(running.ran(turn.pk)) == 1
    assert normalized_messages(watcher) == normalized_messages(pages["web-1"])
    for page in pages.values():
        _as_stored(page, answer)


# Stop pressed on each web process, for a turn on each worker; the turn is sent through the
# other web process each time.
@pytest.mark.parametrize(
    ("stop_on", "runs_on"),
    [("web-1", "worker-1"), ("web-1", "worker-2"), ("web-2", "worker-1"), ("web-2", "worker-2")],
)
def test_stop_on_either_web_process_stops_the_turn_wherever_it_runs(
    running: Cluster, signed_in: SignedIn, e2e_user: Any, stop_on: str, runs_on: str
) -> None:
    sent_on = next(web for web in WEBS if web != stop_on)
    chat = _chat(e2e_user, 30)  # about 11 s: Stop lands well inside it
    pages = {web: signed_in(web) for web in WEBS}
    with running.pinned(runs_on):
        _send_then_open_elsewhere(pages, chat, sent_on, "[demo:slow] Explain the history of the web in detail.")
        stopper = pages[stop_on]
        stopper.wait_for_function(RUNNING_WITH_TEXT, arg=40, timeout=15_000)
        stopper.get_by_test_id("stop-button").click()
        for page in pages.values():
            expect(page.locator(".stopped-label")).to_be_visible(timeout=5_000)

    turn, partial = _answer(chat)
    assert running.ran(turn.pk) == [runs_on]
    assert turn.status == Turn.Status.CANCELLED, (turn.status, turn.error)
    assert partial.metadata == {"stopped": True}
    assert 40 < len(partial.content) < len(SLOW_TEXT.strip()) and SLOW_TEXT.startswith(partial.content)
    shown = {web: _text(page) for web, page in pages.items()}
    time.sleep(1.0)  # nothing streams after Stop
    assert {web: _text(page) for web, page in pages.items()} == shown
    for page in pages.values():
        _as_stored(page, partial)


def test_restarting_the_web_processes_one_at_a_time_loses_no_streamed_text(
    running: Cluster, signed_in: SignedIn, e2e_user: Any
) -> None:
    chat = _chat(e2e_user, 8)  # about 40 s: both restarts fit inside the answer
    # While its web process is away, the browser logs each refused reconnect, and htmx the
    # error event that goes with it.
    pages = {web: signed_in(web, allow_console=("WebSocket connection", "[object Event]")) for web in WEBS}
    _send_then_open_elsewhere(pages, chat, "web-1", "[demo:slow] A long answer, please.")
    for page in pages.values():
        page.evaluate(
            """() => document.addEventListener("htmx:wsClose", (e) => {
                window.closeCodes = (window.closeCodes || []).concat(e.detail.event.code);
            })"""
        )
    for web in WEBS:
        page = pages[web]
        page.wait_for_function(RUNNING_WITH_TEXT, arg=20, timeout=15_000)
        running.restart_web(web)
        # The page heard "service restart" and reconnected to the new process while the turn
        # was still streaming: what it shows next comes over the new socket.
        page.wait_for_function(
            "() => (window.closeCodes || []).includes(1012) && document.body.dataset.ws === 'open'", timeout=20_000
        )
        assert Turn.objects.get(chat=chat).status == Turn.Status.RUNNING, f"the answer ended before {web} was back"

    for page in pages.values():
        wait_turn_done(page, 90_000)
    turn, answer = _answer(chat)
    assert turn.status == Turn.Status.COMPLETED, (turn.status, turn.error)
    assert answer.content.strip() == SLOW_TEXT.strip()
    assert normalized_messages(pages["web-1"]) == normalized_messages(pages["web-2"])
    for page in pages.values():
        _as_stored(page, answer)


# Last: the killed worker is started again only if a test comes after it (`running`), which costs
# a worker's start-up.
def test_a_killed_worker_turn_is_closed_by_the_other_worker_and_pages_are_told(
    running: Cluster, signed_in: SignedIn, e2e_user: Any
) -> None:
    chat = _chat(e2e_user, 30)
    pages = {web: signed_in(web) for web in WEBS}
    with running.pinned("worker-1"):
        _send_then_open_elsewhere(pages, chat, "web-1", "[demo:slow] Take your time.")
        for page in pages.values():
            page.wait_for_function(RUNNING_WITH_TEXT, arg=120, timeout=15_000)
        running.kill_worker("worker-1")
        seen = {web: _text(page) for web, page in pages.items()}
        # worker-2's reaper finds the turn without a heartbeat (within about 20 s).
        for page in pages.values():
            expect(page.locator(".turn-error")).to_contain_text("Interrupted.", timeout=45_000)

    turn, partial = _answer(chat)
    assert running.ran(turn.pk) == ["worker-1"]
    assert turn.status == Turn.Status.INTERRUPTED
    closed_by = [r for r in running.records("worker-2") if r.get("message", "").startswith(f"Turn {turn.pk} lost")]
    assert closed_by, "worker-2 did not close the turn"
    assert partial.metadata == {"stopped": True}
    assert SLOW_TEXT.startswith(partial.content) and len(partial.content) < len(SLOW_TEXT.strip())
    for web, page in pages.items():
        # All the page had shown when the worker died is still there (the streaming and the
        # finished rendering of the same Markdown differ only in blank lines).
        assert _words(_text(page)).startswith(_words(seen[web]))
        _as_stored(page, partial)
