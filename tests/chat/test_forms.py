"""Every chat form field is validated: a bad value is a clear 400 (or an inline error), never a
500, and nothing the person typed is silently cut."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from chat.forms import MAX_MESSAGE_LENGTH
from chat.models import Chat, LLMModel, Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(user: Any, demo_model: LLMModel) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", ["abc", "1e400", "-1", "99999999999999999999999", "[1]"])
def test_new_chat_with_a_bad_model_is_a_400(owner: Client, user: Any, model: str) -> None:
    response = owner.post("/chats/new/", {"content": "Hello", "model": model})

    assert response.status_code == 400
    assert "Choose one of the available models." in response.content.decode()
    assert not Chat.objects.filter(owner=user).exists()


def test_new_chat_with_a_disabled_model_is_a_400(owner: Client) -> None:
    off = LLMModel.objects.create(name="Off", model="openai/x", enabled=False)
    assert owner.post("/chats/new/", {"content": "Hello", "model": off.pk}).status_code == 400


def test_new_chat_with_an_enabled_model_uses_it(owner: Client, user: Any) -> None:
    other = LLMModel.objects.create(name="Other", model="openai/x")
    assert owner.post("/chats/new/", {"content": "Hello", "model": other.pk}).status_code == 302
    assert Chat.objects.get(owner=user).model == other


def test_message_with_a_nul_character_is_a_400_not_a_database_error(owner: Client, user: Any) -> None:
    chat = Chat.objects.create(owner=user)
    response = owner.post(f"/chats/{chat.pk}/messages/", {"content": "hi\x00there"})
    assert response.status_code == 400 and "Null characters are not allowed" in response.content.decode()
    assert not Message.objects.exists()


def test_too_long_message_is_refused_whole_not_cut(owner: Client, user: Any) -> None:
    chat = Chat.objects.create(owner=user)
    response = owner.post(f"/chats/{chat.pk}/messages/", {"content": "x" * (MAX_MESSAGE_LENGTH + 1)})
    assert response.status_code == 400 and "too long" in response.content.decode()
    assert owner.post(f"/chats/{chat.pk}/messages/", {"content": "x" * MAX_MESSAGE_LENGTH}).status_code == 200


def test_rename_with_a_nul_character_is_a_400(owner: Client, user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Kept")
    assert owner.post(f"/chats/{chat.pk}/rename/", {"title": "a\x00b"}).status_code == 400
    chat.refresh_from_db()
    assert chat.title == "Kept"


@pytest.mark.parametrize("value", ["abc", "1e400", "0", "-3", "9" * 40])
def test_settings_report_a_bad_number_inline_and_keep_the_old_one(owner: Client, user: Any, value: str) -> None:
    chat = Chat.objects.create(owner=user, max_tool_iterations=4)
    response = owner.post(f"/chats/{chat.pk}/settings/", {"max_tool_iterations": value, "limit_tool_iterations": "on"})
    assert response.status_code == 200
    assert 'role="alert"' in response.content.decode()
    chat.refresh_from_db()
    assert chat.max_tool_iterations == 4


def test_huge_ids_in_urls_are_404s(owner: Client) -> None:
    assert owner.get("/chats/99999999999999999999999999/").status_code == 404
    assert owner.post("/chats/99999999999999999999999999/messages/", {"content": "x"}).status_code == 404
