"""A chat that outgrew its model: the running summary's marker, "Earlier messages summarized",
with the summary expandable, live and after a reload, the summary written once and reused by the
next turn; old tool results shortened, said so, and read back. A real worker streams from the
replay server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent.context import READ_TOOL
from agent.loop import COMPACTED_NOTICE
from chat.models import Chat, ContextSummary, LLMModel, Message, Turn
from chat.worker.compaction import INSTRUCTIONS
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, calls, finish, role
from tests.providers.shapes import call as call_delta

from .conftest import send, send_and_wait, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e

SUMMARY = "The user asked about six rivers; the assistant described each <b>at length</b>."


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


@pytest.fixture
def long_chat(e2e_user: Any, replay: ReplayServer) -> Chat:
    model = LLMModel.objects.create(
        name="Small",
        model="openai/replay",
        api_base=replay.base_url,
        api_key="sk-replay",
        context_window=5000,
        answer_reserve=300,
    )
    chat = Chat.objects.create(owner=e2e_user, model=model, title="Rivers")
    for i in range(6):
        turn = Turn.objects.create(chat=chat, model=model, status=Turn.Status.COMPLETED)
        Message.objects.create(chat=chat, turn=turn, role="user", content=f"Tell me about river {i}.")
        long = " ".join(f"river{i}fact{j}" for j in range(300))
        Message.objects.create(chat=chat, turn=turn, step=0, role="assistant", content=long)
    return chat


def test_the_summary_marker_opens_on_the_summary_live_and_after_reload(
    page: Page, long_chat: Chat, replay: ReplayServer
) -> None:
    replay.play(answer(SUMMARY), answer("Rivers flow to the sea."), answer("The Nile is long."))
    page.goto(f"{page.base_url}/chats/{long_chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send(page, "Which was longest?")
    page.wait_for_function("() => document.querySelectorAll('.turn').length > 6")
    wait_turn_done(page)

    marker = page.locator(".turn").last.get_by_test_id("context-summary")
    expect(marker).to_have_count(1)
    expect(marker.locator("summary")).to_have_text("Earlier messages summarized")
    text = marker.locator(".context-summary-text")
    expect(text).to_be_hidden()
    marker.locator("summary").click()
    # Model output shown as text: the markup it wrote is not markup on the page.
    expect(text).to_have_text(SUMMARY)
    expect(text.locator("b")).to_have_count(0)
    shot(page, "context-summary-live")

    page.reload()
    wait_socket(page)
    marker = page.locator(".turn").last.get_by_test_id("context-summary")
    expect(marker.locator("summary")).to_have_text("Earlier messages summarized")
    marker.locator("summary").click()
    expect(marker.locator(".context-summary-text")).to_have_text(SUMMARY)
    shot(page, "context-summary-reloaded")

    # What the provider was sent: first the summary request, then the fitted chat.
    to_summarize, fitted = replay.requests[0].messages, replay.requests[1].messages
    assert to_summarize[0]["content"] == INSTRUCTIONS
    assert "river0fact1" in to_summarize[1]["content"]
    assert fitted[0]["role"] == "system" and fitted[0]["content"].endswith(SUMMARY)
    assert not any("river0fact1" in str(m["content"]) for m in fitted)
    assert fitted[-1] == {"role": "user", "content": "Which was longest?"}
    # The chat itself is whole: the page shows every exchange.
    assert Message.objects.filter(chat=long_chat).count() == 14

    # The next turn reuses the stored summary instead of writing another one.
    send_and_wait(page, "And the shortest?")
    assert ContextSummary.objects.filter(chat=long_chat).count() == 1
    assert len(replay.requests) == 3
    assert replay.requests[2].messages[0]["content"].endswith(SUMMARY)
    # The marker stays where the summary was written.
    expect(page.get_by_test_id("context-summary")).to_have_count(1)
    expect(page.locator(".turn").last.get_by_test_id("context-summary")).to_have_count(0)


def test_shortened_results_are_told_and_the_read_back_card_shows_it_ran(
    page: Page, e2e_user: Any, replay: ReplayServer
) -> None:
    model = LLMModel.objects.create(
        name="Small",
        model="openai/replay",
        api_base=replay.base_url,
        api_key="sk-replay",
        context_window=6000,
        answer_reserve=500,
    )
    chat = Chat.objects.create(owner=e2e_user, model=model, title="Pages")
    for n in range(8):
        turn = Turn.objects.create(chat=chat, model=model, status=Turn.Status.COMPLETED)
        Message.objects.create(chat=chat, turn=turn, role="user", content=f"Fetch page {n}.")
        call = {"id": f"call-{n}", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
        Message.objects.create(chat=chat, turn=turn, step=0, role="assistant", content="", tool_calls=[call])
        page_text = " ".join(f"page{n}word{i}" for i in range(400))
        Message.objects.create(chat=chat, turn=turn, step=0, role="tool", tool_call_id=f"call-{n}", content=page_text)
        Message.objects.create(chat=chat, turn=turn, step=1, role="assistant", content=f"Page {n} read.")
    read = calls(call_delta(0, id="read-1", name=READ_TOOL, args='{"handle": "call-0"}'))
    replay.play(Reply([role(), read, finish("tool_calls")]), answer("Page 0 began with page0word0."))
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send(page, "How did page 0 begin?")
    page.wait_for_function("() => document.querySelectorAll('.turn').length > 8")
    wait_turn_done(page)

    last = page.locator(".turn").last
    expect(last.locator(".notice")).to_have_text([COMPACTED_NOTICE])
    card = last.locator(f'[data-tool="{READ_TOOL}"]')
    expect(card).to_have_attribute("data-status", "success")
    expect(card.get_by_test_id("tool-call-summary")).to_contain_text("Result call-0, characters 0–4000 of")
    expect(last.locator(".md").last).to_have_text("Page 0 began with page0word0.")
    shot(page, "context-read-back-live")

    page.reload()
    wait_socket(page)
    last = page.locator(".turn").last
    expect(last.locator(".notice")).to_have_text([COMPACTED_NOTICE])
    card = last.locator(f'[data-tool="{READ_TOOL}"]')
    expect(card).to_have_attribute("data-status", "success")
    expect(card.get_by_test_id("tool-call-summary")).to_contain_text("Result call-0, characters 0–4000 of")
