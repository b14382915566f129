"""Versions of an exchange: editing a question, regenerating an answer, moving between
versions; what the page shows and what the next turn sends."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat import branches
from chat.models import Chat, LLMModel, Message, Turn
from chat.worker import turn_store

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(user: Any, demo_model: LLMModel) -> Chat:
    return Chat.objects.create(owner=user, model=demo_model)


@pytest.fixture
def owner(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def _answered(chat: Chat, question: str, answer: str) -> Turn:
    """An exchange as the worker leaves it: the question, a finished answer."""
    client = Client()
    client.force_login(chat.owner)
    response = client.post(reverse("chat:send", args=[chat.pk]), {"content": question})
    assert response.status_code == 200, response.content
    return _finish(Turn.objects.filter(chat=chat).latest("id"), answer)


def _finish(turn: Turn, answer: str) -> Turn:
    Message.objects.create(chat=turn.chat, turn=turn, step=0, role="assistant", content=answer)
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.COMPLETED)
    turn.refresh_from_db()
    return turn


def _contents(chat: Chat) -> list[str]:
    return [m["content"] for m in turn_store.transcript(chat.pk)]


def test_an_edit_is_a_new_version_and_only_its_branch_is_the_transcript(owner: Client, chat: Chat) -> None:
    first = _answered(chat, "first", "answer one")
    second = _answered(chat, "second", "answer two")
    _answered(chat, "third", "answer three")

    response = owner.post(reverse("chat:edit", args=[second.pk]), {"content": "second, edited"})

    assert response.status_code == 200
    edited = Turn.objects.latest("id")
    assert edited.parent_id == first.pk
    assert list(Turn.objects.filter(chat=chat, active=True).values_list("pk", flat=True)) == [first.pk, edited.pk]
    _finish(edited, "answer two, edited")
    assert _contents(chat) == ["first", "answer one", "second, edited", "answer two, edited"]
    # The new turn's own transcript is its branch, whatever the chat shows meanwhile.
    assert [m["content"] for m in turn_store.transcript(chat.pk, edited.pk)][-1] == "answer two, edited"
    html = response.content.decode()
    assert "second, edited" in html and "answer three" not in html
    assert 'data-testid="version-label">2 / 2<' in html


def test_going_back_to_a_version_brings_back_its_branch_below(owner: Client, chat: Chat) -> None:
    _answered(chat, "first", "answer one")
    second = _answered(chat, "second", "answer two")
    third = _answered(chat, "third", "answer three")
    owner.post(reverse("chat:edit", args=[second.pk]), {"content": "second, edited"})
    _finish(Turn.objects.latest("id"), "answer two, edited")

    response = owner.post(reverse("chat:choose", args=[second.pk]))

    assert response.status_code == 200
    assert _contents(chat) == ["first", "answer one", "second", "answer two", "third", "answer three"]
    html = owner.get(reverse("chat:detail", args=[chat.pk])).content.decode()
    assert "answer three" in html and "answer two, edited" not in html
    assert 'data-testid="version-label">1 / 2<' in html
    assert branches.last_turn(chat) == third


def test_regenerate_answers_the_same_question_again_with_the_chosen_model(
    owner: Client, chat: Chat, demo_model: LLMModel
) -> None:
    other = LLMModel.objects.create(name="Other", model="openai/other", api_base="http://127.0.0.1:9/v1")
    turn = _answered(chat, "question", "answer one")

    response = owner.post(reverse("chat:regenerate", args=[turn.pk]), {"model": other.pk})

    assert response.status_code == 200
    again = Turn.objects.latest("id")
    assert again.parent_id is None and again.model == other
    assert Message.objects.get(turn=again, role="user").content == "question"
    assert list(Turn.objects.filter(chat=chat, active=True)) == [again]
    # The version switcher sits under the answer: the question did not change.
    html = response.content.decode()
    assert html.index('data-testid="versions"') > html.index('data-testid="answer-actions"')
    # Again with the same model: the one the answer used.
    _finish(again, "answer two")
    owner.post(reverse("chat:regenerate", args=[again.pk]), {"model": ""})
    assert Turn.objects.latest("id").model == other
    assert Turn.objects.filter(chat=chat, parent=None).count() == 3


@pytest.mark.parametrize("name", ["chat:edit", "chat:regenerate", "chat:choose"])
@pytest.mark.parametrize("status", [Turn.Status.QUEUED, Turn.Status.RUNNING])
def test_branch_changes_wait_for_the_running_answer(owner: Client, chat: Chat, name: str, status: str) -> None:
    first = _answered(chat, "first", "answer one")
    Turn.objects.create(chat=chat, status=status)
    before = Turn.objects.count()

    response = owner.post(reverse(name, args=[first.pk]), {"content": "edited"})

    assert response.status_code == 409
    assert "Wait for the current answer" in response.content.decode()
    assert Turn.objects.count() == before


@pytest.mark.parametrize("name", ["chat:edit", "chat:regenerate", "chat:choose", "chat:markdown"])
def test_another_users_turn_is_not_found(client: Client, other_user: Any, chat: Chat, name: str) -> None:
    turn = _answered(chat, "mine", "secret answer")
    client.force_login(other_user)

    response = (
        client.get(reverse(name, args=[turn.pk]))
        if name == "chat:markdown"
        else client.post(reverse(name, args=[turn.pk]), {"content": "hijack"})
    )

    assert response.status_code == 404
    assert Turn.objects.count() == 1


@pytest.mark.parametrize("content", ["", "   ", "x" * 32_001, "nul\x00byte"])
def test_an_edit_must_be_a_valid_message(owner: Client, chat: Chat, content: str) -> None:
    turn = _answered(chat, "question", "answer")

    response = owner.post(reverse("chat:edit", args=[turn.pk]), {"content": content})

    assert response.status_code == 400
    assert Turn.objects.count() == 1


def test_regenerate_refuses_an_unknown_model(owner: Client, chat: Chat) -> None:
    turn = _answered(chat, "question", "answer")

    response = owner.post(reverse("chat:regenerate", args=[turn.pk]), {"model": "999999"})

    assert response.status_code == 400
    assert "Choose one of the available models" in response.content.decode()


def test_continue_the_answer_cannot_be_edited(owner: Client, chat: Chat) -> None:
    turn = _answered(chat, "question", "answer")
    cont = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    Message.objects.create(chat=chat, turn=cont, role="user", content="go on", metadata={"continues": turn.pk})

    assert owner.post(reverse("chat:edit", args=[cont.pk]), {"content": "x"}).status_code == 400


def test_copy_gives_the_answers_markdown_source(owner: Client, chat: Chat) -> None:
    source = 'Here:\n\n```python\nprint("<b>")\n```\n\n:::component{type="task_table"}\n[]\n:::'
    turn = _answered(chat, "question", source)

    response = owner.get(reverse("chat:markdown", args=[turn.pk]))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == source


def test_versions_cost_no_query_for_a_chat_without_any(chat: Chat, django_assert_num_queries: Any) -> None:
    for i in range(3):
        _answered(chat, f"q{i}", f"a{i}")
    turns = list(branches.with_versions(chat.turns.filter(active=True)))

    with django_assert_num_queries(0):
        assert branches.versions(turns) == {}


def test_a_turn_created_without_a_parent_follows_the_shown_branch(chat: Chat) -> None:
    first = Turn.objects.create(chat=chat)
    second = Turn.objects.create(chat=chat)

    assert (first.parent_id, second.parent_id) == (None, first.pk)


# --- settings before the first message -----------------------------------------------------------


def test_home_settings_panel_checks_the_choices_without_storing_anything(owner: Client, demo_model: LLMModel) -> None:
    response = owner.post(reverse("chat:draft_settings"), {"settings": "1", "max_tool_iterations": "3"})

    assert response.status_code == 200
    html = response.content.decode()
    assert 'value="3"' in html and "Applies to the new chat" in html
    assert not Chat.objects.exists()
    bad = owner.post(reverse("chat:draft_settings"), {"limit_tool_iterations": "on", "max_tool_iterations": "999"})
    assert "Choose a number from 1 to" in bad.content.decode()


def test_the_first_message_creates_the_chat_with_the_settings_chosen_before(
    owner: Client, user: Any, demo_model: LLMModel
) -> None:
    other = LLMModel.objects.create(name="Other", model="openai/other", api_base="http://127.0.0.1:9/v1")

    owner.post(
        reverse("chat:create"),
        {
            "content": "hello",
            "settings": "1",
            "model": other.pk,
            "limit_tool_iterations": "on",
            "max_tool_iterations": "2",
        },
    )

    chat = Chat.objects.get(owner=user)
    assert (chat.model, chat.limit_tool_iterations, chat.max_tool_iterations) == (other, True, 2)
    owner.post(reverse("chat:create"), {"content": "again", "settings": "1"})
    assert Chat.objects.filter(owner=user).latest("id").limit_tool_iterations is False


def test_bad_settings_with_the_first_message_create_nothing(owner: Client, demo_model: LLMModel) -> None:
    response = owner.post(
        reverse("chat:create"),
        {"content": "hello", "settings": "1", "limit_tool_iterations": "on", "max_tool_iterations": "0"},
    )

    assert response.status_code == 400
    assert not Chat.objects.exists()
