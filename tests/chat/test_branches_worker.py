"""Through the real worker: after an edit, the provider receives only the branch the chat shows
(a local OpenAI-compatible server records every request)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat.models import Chat, LLMModel, Turn
from tests.providers.replay import ReplayServer, Reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _answer(text: str) -> Reply:
    return Reply(
        chunks=[
            {"delta": {"role": "assistant", "content": text}},
            {"delta": {}, "finish_reason": "stop"},
        ]
    )


@pytest.fixture
def provider() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


def _wait_done(chat: Chat, timeout: float = 60) -> Turn:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turn = Turn.objects.filter(chat=chat).latest("id")
        if not turn.is_active:
            assert turn.status == Turn.Status.COMPLETED, turn.error
            return turn
        time.sleep(0.1)
    raise AssertionError("the worker did not finish the turn")


def _conversation(request: Any) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request.messages if m["role"] != "system"]


def test_the_provider_gets_only_the_current_branch_after_an_edit(stack: Any, user: Any, provider: ReplayServer) -> None:
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")
    chat = Chat.objects.create(owner=user, model=model, enabled_tools={})
    client = Client()
    client.force_login(user)
    provider.play(_answer("Answer one."), _answer("Answer two."), _answer("Answer two, edited."), _answer("Four."))

    client.post(reverse("chat:send", args=[chat.pk]), {"content": "Question one"})
    _wait_done(chat)
    client.post(reverse("chat:send", args=[chat.pk]), {"content": "Question two"})
    second = _wait_done(chat)
    assert client.post(reverse("chat:edit", args=[second.pk]), {"content": "Question two, edited"}).status_code == 200
    _wait_done(chat)

    assert _conversation(provider.requests[2]) == [
        ("user", "Question one"),
        ("assistant", "Answer one."),
        ("user", "Question two, edited"),
    ]

    # Back on the first version, the next question follows that branch.
    client.post(reverse("chat:choose", args=[second.pk]))
    client.post(reverse("chat:send", args=[chat.pk]), {"content": "Question three"})
    _wait_done(chat)
    assert _conversation(provider.requests[3]) == [
        ("user", "Question one"),
        ("assistant", "Answer one."),
        ("user", "Question two"),
        ("assistant", "Answer two."),
        ("user", "Question three"),
    ]
