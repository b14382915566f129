"""Through the real worker and a scripted provider: a memory saved in one chat is offered in the
next chat's prompt, and never in another user's, in the chat or through /v1."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from django.test import Client
from django.urls import reverse

from chat.models import AppSettings, Chat, LLMModel, Turn
from hub.models import ApiToken
from memory import store
from memory.models import Memory
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role
from tests.providers.worker_turns import finished, replay_model

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SAVE = "toolset__memory__save_memory"
MEMORY_TOOLS = {"memory": ["save_memory", "update_memory", "forget_memory", "list_memories"]}


@pytest.fixture
def model(provider: ReplayServer) -> LLMModel:
    return replay_model(provider)


def _ask(user: Any, model: LLMModel, text: str) -> tuple[Chat, Turn]:
    chat = Chat.objects.create(owner=user, model=model, enabled_tools=MEMORY_TOOLS)
    client = Client()
    client.force_login(user)
    client.post(reverse("chat:send", args=[chat.pk]), {"content": text})
    return chat, finished(chat)


def _system(request: Any) -> str:
    return str(next(m["content"] for m in request.body["messages"] if m["role"] == "system"))


def test_saved_in_one_chat_offered_in_the_next_and_never_to_another_user(
    stack: Any, user: Any, other_user: Any, model: LLMModel, provider: ReplayServer
) -> None:
    saving = Reply(
        [
            role(),
            calls(call(0, "call_1", SAVE, json.dumps({"text": "Prefers answers in German"}))),
            finish("tool_calls"),
        ]
    )
    provider.play(saving, answer("Noted."), answer("Gern."), answer("Hello."))

    _, first = _ask(user, model, "Remember that I prefer answers in German")
    assert first.status == Turn.Status.COMPLETED, first.error
    assert SAVE in {t["function"]["name"] for t in provider.requests[0].body["tools"]}
    assert Memory.objects.get(owner=user).text == "Prefers answers in German"

    _, second = _ask(user, model, "What should I answer my German colleague?")
    assert second.status == Turn.Status.COMPLETED, second.error
    prompt = _system(provider.requests[2])
    assert "Prefers answers in German</memory>" in prompt and "not instructions" in prompt

    _ask(other_user, model, "What should I answer my German colleague?")
    assert "Prefers answers in German" not in json.dumps(provider.requests[3].body)


def test_memory_off_offers_neither_memories_nor_tools(
    stack: Any, user: Any, model: LLMModel, provider: ReplayServer
) -> None:
    store.save(user.pk, "Prefers answers in German")
    store.set_enabled(user.pk, False)
    provider.play(answer("Hello."))

    _ask(user, model, "German?")

    body = json.dumps(provider.requests[0].body)
    assert "Prefers answers in German" not in body and SAVE not in body


def test_through_v1_only_the_callers_memories(
    stack: Any, user: Any, other_user: Any, model: LLMModel, provider: ReplayServer
) -> None:
    settings = AppSettings.load()
    settings.openai_api = True
    settings.save()
    store.save(user.pk, "Prefers answers in German")
    provider.play(answer("Hello."), answer("Hallo."))
    question: Any = [{"role": "user", "content": "Which language do I prefer for answers?"}]

    for caller in (other_user, user):
        token = ApiToken.issue(caller, "script")[1]
        client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=token, max_retries=0, timeout=60)
        client.chat.completions.create(model=model.name, messages=question)

    assert "Prefers answers in German" not in json.dumps(provider.requests[0].body)
    assert "Prefers answers in German</memory>" in _system(provider.requests[1])
