"""What MCP Apps' Views tell the model (chat/app_context.py): kept per chat, the latest update of
each of the five most recent Views, and read by the chat's next turn in the round trip that claims
it (chat/worker/turns.py) — into that chat's system prompt only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat import app_context
from chat.models import Chat, LLMModel, Turn
from core.redis_client import sync_client
from tests.providers.replay import ReplayServer
from tests.providers.shapes import answer
from tests.providers.worker_turns import finished, replay_model

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def model(provider: ReplayServer) -> LLMModel:
    return replay_model(provider)


def _ask(chat: Chat, text: str) -> Turn:
    client = Client()
    client.force_login(chat.owner)
    client.post(reverse("chat:send", args=[chat.pk]), {"content": text})
    return finished(chat)


def _system(request: Any) -> str:
    return str(next(m["content"] for m in request.body["messages"] if m["role"] == "system"))


def test_a_view_s_update_reaches_its_chat_s_next_turn_and_no_other_chat(
    stack: Any, user: Any, model: LLMModel, provider: ReplayServer
) -> None:
    chat = Chat.objects.create(owner=user, model=model)
    other = Chat.objects.create(owner=user, model=model)
    app_context.store(chat.pk, 41, "Maps", "The user is looking at <Lisbon>.")
    provider.play(answer("Lisbon."), answer("Hello."))

    assert _ask(chat, "Where am I looking?").status == Turn.Status.COMPLETED
    assert _ask(other, "Where am I looking?").status == Turn.Status.COMPLETED

    prompt = _system(provider.requests[0])
    assert '<app server="Maps">\nThe user is looking at &lt;Lisbon&gt;.\n</app>' in prompt
    assert "It comes from the apps, not from the user" in prompt
    assert "Lisbon" not in _system(provider.requests[1])


def test_each_view_keeps_its_latest_update_of_the_five_most_recent_views(db: Any) -> None:
    for view in range(1, 8):
        app_context.store(9, view, f"Server {view}", f"view {view} first")
    app_context.store(9, 7, "Server 7", "view 7 again")
    prompt = app_context.for_prompt(9)
    assert [f"view {n}" in prompt for n in range(1, 8)] == [False, False, True, True, True, True, True]
    assert "view 7 again" in prompt and "view 7 first" not in prompt
    # Oldest first, as the Views spoke.
    assert prompt.index("view 3 first") < prompt.index("view 6 first") < prompt.index("view 7 again")
    assert len(sync_client().hkeys(app_context.key(9))) == 5

    # An empty update drops the View's context; a chat whose Views said nothing adds nothing.
    for view in range(3, 8):
        assert app_context.store(9, view, f"Server {view}", "  ") == 0
    assert app_context.for_prompt(9) == "" and app_context.for_prompt(10) == ""


def test_an_unreadable_entry_is_left_out_not_a_failed_turn(db: Any) -> None:
    app_context.store(11, 1, "Good", "kept")
    sync_client().hset(app_context.key(11), "2", b"\xff not json")
    sync_client().hset(app_context.key(11), "3", '{"server": "No text"}')
    prompt = app_context.for_prompt(11)
    assert '<app server="Good">\nkept\n</app>' in prompt and "No text" not in prompt
