"""Token usage: the per-user ledger, its admin list, and how a turn shows its tokens."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from agent.types import AssistantMessage, Usage
from chat import presenters
from chat.models import Chat, Message, TokenUsage, Turn
from chat.spend import usage

pytestmark = pytest.mark.django_db


def test_ledger_adds_each_model_call(user: Any) -> None:
    TokenUsage.record(user.pk, 100, 20)
    TokenUsage.record(user.pk, 50, 5)
    row = TokenUsage.objects.get(user=user)
    assert (row.prompt_tokens, row.completion_tokens, row.model_calls, row.total_tokens) == (150, 25, 2, 175)


def test_a_call_without_reported_usage_is_not_counted(user: Any) -> None:
    usage.record_call(user.pk, Usage())
    assert not TokenUsage.objects.exists()
    fields = usage.message_fields(AssistantMessage(content="x"))
    assert fields["prompt_tokens"] is None and fields["completion_tokens"] is None


def test_admin_lists_every_users_total_in_constant_queries(
    admin_client: Client, django_assert_max_num_queries: Any
) -> None:
    users = get_user_model()
    for n in range(3):
        TokenUsage.record(users.objects.create_user(f"u{n}").pk, 10 * (n + 1), n)
    # Among them, one per settings row the admin's menu asks about (app, policies, files, knowledge
    # search, automations).
    with django_assert_max_num_queries(10) as few:
        response = admin_client.get("/admin/chat/tokenusage/")
    for n in range(3, 12):
        TokenUsage.record(users.objects.create_user(f"u{n}").pk, 10, 1)
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = admin_client.get("/admin/chat/tokenusage/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "u0" in body and "u11" in body and "Total tokens" in body


def test_turn_shows_its_tokens_and_each_calls_split(user: Any) -> None:
    chat = Chat.objects.create(owner=user)
    turn = Turn.objects.create(
        chat=chat, status=Turn.Status.COMPLETED, usage={"prompt_tokens": 1500, "completion_tokens": 34}
    )
    messages = [
        Message(chat=chat, turn=turn, step=0, role="assistant", prompt_tokens=700, completion_tokens=30),
        Message(chat=chat, turn=turn, step=1, role="assistant", prompt_tokens=800, completion_tokens=4),
    ]
    view = presenters.turn_from_db(turn, messages, [])
    assert view["usage"]["text"] == "1,534 tokens"
    assert view["usage"]["detail"] == "1,500 in · 34 out"
    assert view["usage"]["title"] == "Model call 1: 700 in, 30 out\nModel call 2: 800 in, 4 out"
    from django.template.loader import render_to_string

    html = render_to_string("chat/_turn_state.html", {"turn": view})
    assert 'data-testid="turn-usage"' in html and "1,534 tokens" in html


def test_cached_prompt_tokens_are_shown_when_the_provider_reported_them() -> None:
    shown = usage.view({"prompt_tokens": 1500, "completion_tokens": 34, "cached_tokens": 1200}, [])
    assert shown is not None and shown["detail"] == "1,500 in · 34 out · 1,200 cached"


def test_a_turn_without_usage_shows_none(user: Any) -> None:
    chat = Chat.objects.create(owner=user)
    turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    assert presenters.turn_from_db(turn, [], [])["usage"] is None


def test_turn_admin_shows_tokens(admin_client: Client, user: Any) -> None:
    chat = Chat.objects.create(owner=user)
    Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED, usage={"prompt_tokens": 1200, "completion_tokens": 7})
    body = admin_client.get("/admin/chat/turn/").content.decode()
    assert "1,200 / 7" in body
