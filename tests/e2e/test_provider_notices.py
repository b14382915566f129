"""What the reader sees of how a provider ended an answer: the token-limit notice with its
Continue button, and the tokens a turn used. A real worker streams from the replay server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat.models import Chat, LLMModel, Message, Turn
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, usage

from .conftest import send, shot, wait_socket, wait_turn_done

pytestmark = pytest.mark.e2e


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


@pytest.fixture
def chat(e2e_user: Any, replay: ReplayServer) -> Chat:
    model = LLMModel.objects.create(
        name="Replay", model="openai/replay", api_base=replay.base_url, api_key="sk-replay", is_default=True
    )
    return Chat.objects.create(owner=e2e_user, model=model, title="Cut answers")


def cut(words: str, prompt: int, completion: int) -> Reply:
    reply = answer(words, reason="length")
    return Reply([*reply.chunks, usage(prompt, completion)])


def test_a_cut_answer_says_so_and_can_be_continued(page: Page, chat: Chat, replay: ReplayServer) -> None:
    replay.play(cut("Once upon a time, in a land far", 1200, 64))
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send(page, "Tell me a long story")
    wait_turn_done(page)

    # Live: the notice, the Continue button and the tokens, without a reload.
    notice = page.locator(".turn .notice")
    expect(notice).to_have_text("The answer was cut by the token limit.")
    button = page.get_by_test_id("continue-button")
    expect(button).to_be_visible()
    expect(button).to_be_enabled()
    tokens = page.get_by_test_id("turn-usage")
    expect(tokens).to_contain_text("1,264 tokens")
    page.locator(".turn").last.hover()
    expect(tokens).to_contain_text("1,200 in · 64 out")
    shot(page, "provider-cut-answer")

    # After a reload: the same.
    page.reload()
    wait_socket(page)
    expect(page.locator(".turn .notice")).to_have_text("The answer was cut by the token limit.")
    expect(page.get_by_test_id("continue-button")).to_be_visible()
    expect(page.get_by_test_id("turn-usage")).to_contain_text("1,264 tokens")

    replay.play(answer("and the story ends."))
    page.get_by_test_id("continue-button").click()
    expect(page.locator(".turn")).to_have_count(2)
    wait_turn_done(page)
    expect(page.locator(".turn").last.locator(".md")).to_have_text("and the story ends.")
    expect(page.locator(".msg-user").last).to_have_text("Continue the answer")
    expect(page.get_by_test_id("continue-button")).to_have_count(0)
    shot(page, "provider-continued")

    sent = replay.requests[0].messages
    assert sent[-2] == {"role": "assistant", "content": "Once upon a time, in a land far"}
    first, second = Turn.objects.filter(chat=chat).order_by("id")
    assert second.status == Turn.Status.COMPLETED
    assert Message.objects.get(turn=second, role="user").metadata == {"continues": first.pk}

    page.reload()
    wait_socket(page)
    expect(page.locator(".turn")).to_have_count(2)
    # The first answer keeps its notice; only the latest answer could offer to continue.
    expect(page.locator(".turn").first.locator(".notice")).to_have_text("The answer was cut by the token limit.")
    expect(page.get_by_test_id("continue-button")).to_have_count(0)


def test_continue_is_hidden_while_another_answer_runs(page: Page, chat: Chat, replay: ReplayServer) -> None:
    replay.play(cut("Half", 10, 2))
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send(page, "Go")
    wait_turn_done(page)
    expect(page.get_by_test_id("continue-button")).to_be_visible()
    # A new question instead: its turn runs, and the old answer's button is gone for good.
    replay.play(Reply([*answer("A slow answer " * 30).chunks]))
    send(page, "Something else")
    expect(page.get_by_test_id("continue-button")).to_be_hidden()
    wait_turn_done(page)
    expect(page.get_by_test_id("continue-button")).to_be_hidden()
