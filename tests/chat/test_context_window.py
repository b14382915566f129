"""A chat longer than its model's window, through the real stack: a Celery worker process on
real Redis streams from a local OpenAI-compatible server that enforces a context window the way
providers do (an HTTP 400 "context_length_exceeded"), through LiteLLM's resolution and Tessera's
HTTP client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from agent.context import READ_TOOL
from agent.loop import COMPACTED_NOTICE
from chat.models import Chat, LLMModel, Message, TokenUsage, Turn
from chat.presenters import turn_views
from chat.worker.compaction import INSTRUCTIONS
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WINDOW = 6000


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    server.window = WINDOW
    yield server
    server.stop()


def tool_heavy_chat(user: Any, model: LLMModel, exchanges: int) -> Chat:
    chat = Chat.objects.create(owner=user, model=model, title="Pages")
    for n in range(exchanges):
        turn = Turn.objects.create(chat=chat, model=model, status=Turn.Status.COMPLETED)
        Message.objects.create(chat=chat, turn=turn, role="user", content=f"Fetch page {n}.")
        call = {"id": f"call-{n}", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
        Message.objects.create(chat=chat, turn=turn, step=0, role="assistant", content="", tool_calls=[call])
        page = " ".join(f"page{n}word{i}" for i in range(400))
        Message.objects.create(chat=chat, turn=turn, step=0, role="tool", tool_call_id=f"call-{n}", content=page)
        Message.objects.create(chat=chat, turn=turn, step=1, role="assistant", content=f"Page {n} read.")
    return chat


def ask(user: Any, chat: Chat, text: str) -> Turn:
    client = Client()
    client.force_login(user)
    response = client.post(f"/chats/{chat.pk}/messages/", {"content": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    turn = Turn.objects.filter(chat=chat).order_by("-id").first()
    assert turn is not None
    deadline = time.monotonic() + 60
    while turn.status in Turn.ACTIVE and time.monotonic() < deadline:
        time.sleep(0.2)
        turn.refresh_from_db()
    return turn


def test_a_context_length_error_gets_exactly_one_fitted_retry(stack: Any, user: Any, replay: ReplayServer) -> None:
    # LiteLLM does not know this model and the admin set no window: only the provider's error
    # says the chat is too long.
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=replay.base_url, api_key="sk-x")
    chat = tool_heavy_chat(user, model, 8)
    replay.play(answer("Page 7 said page7word1."))
    turn = ask(user, chat, "What did page 7 say?")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    # Refused once; then (the retry's smaller budget calls for it) the running summary is
    # written; then the fitted retry, answered. The main conversation was sent exactly twice.
    assert replay.sizes[0] > WINDOW and all(size <= WINDOW for size in replay.sizes[1:])
    main = [r for r in replay.requests if r.messages[0]["content"].startswith("You are Tessera")]
    assert len(main) == 2 and len(replay.requests) == 3
    assert replay.requests[1].messages[0]["content"] == INSTRUCTIONS
    assert main[1].messages[-1] == {"role": "user", "content": "What did page 7 say?"}
    # The summary's model call counts in the user's tokens (the refused request cost nothing).
    assert TokenUsage.objects.get(user=user).model_calls == 2
    assert turn.usage["prompt_tokens"] > 0
    assert "fitted and sent again" in " ".join(map(str, turn.notices))
    # The chat keeps every result whole.
    assert Message.objects.filter(chat=chat, role="tool", content__contains="page0word399").exists()


def test_a_known_window_is_never_exceeded_and_old_results_are_read_back(
    stack: Any, user: Any, replay: ReplayServer
) -> None:
    model = LLMModel.objects.create(
        name="Replay",
        model="openai/replay",
        api_base=replay.base_url,
        api_key="sk-x",
        context_window=WINDOW,
        answer_reserve=500,
    )
    chat = tool_heavy_chat(user, model, 8)
    read = calls(call(0, id="read-1", name=READ_TOOL, args='{"handle": "call-0", "limit": 100}'))
    replay.play(Reply([role(), read, finish("tool_calls")]), answer("Page 0 began with page0word0."))
    turn = ask(user, chat, "How did page 0 begin?")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert len(replay.sizes) == 2 and max(replay.sizes) <= WINDOW
    first, second = replay.requests
    assert any('read_tool_result(handle="call-0")' in str(m["content"]) for m in first.messages)
    assert READ_TOOL in [t["function"]["name"] for t in first.body.get("tools") or []]
    # The model read the old result back by its handle: a page of it, from the stored chat.
    assert second.messages[-1]["tool_call_id"] == "read-1"
    assert "page0word0 page0word1" in second.messages[-1]["content"]
    assert "offset=100" in second.messages[-1]["content"]
    # The reader is told, under the answer.
    assert COMPACTED_NOTICE in turn.notices
    # Its card, after a reload, says it ran (it has no execution record of its own).
    view = turn_views([turn])[0][turn.pk]
    (card,) = view["steps"][0]["cards"]
    assert (card["name"], card["status"]) == (READ_TOOL, "success")
