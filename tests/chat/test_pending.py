"""Waiting messages (chat/pending.py, chat/pending_views.py, core/mailbox.py): the queue runs
in order after a completed answer, steers reach the running turn through its mailbox and
become the user's messages in order, and every endpoint checks the chat's owner."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chat import pending
from chat.models import Chat, LLMModel, Message, PendingMessage, Turn
from chat.worker import turn_store
from core import mailbox
from core.redis_client import sync_client

pytestmark = pytest.mark.django_db
Kind = PendingMessage.Kind


@pytest.fixture
def chat(user: Any, demo_model: LLMModel) -> Chat:
    return Chat.objects.create(owner=user, model=demo_model)


@pytest.fixture
def owner(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def _running(chat: Chat) -> Turn:
    turn = Turn.objects.create(chat=chat, status=Turn.Status.RUNNING)
    Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content="First question")
    return turn


def _queued(chat: Chat) -> list[str]:
    return list(PendingMessage.objects.filter(chat=chat, kind=Kind.QUEUED).values_list("content", flat=True))


# --- the mailbox ------------------------------------------------------------------------------


def test_mailbox_gives_items_in_order_once() -> None:
    redis = sync_client()
    for item in ["1", "2", "3"]:
        mailbox.post(redis, "tessera:turn:1:steer", item)
    assert mailbox.take_sync(redis, "tessera:turn:1:steer") == ["1", "2", "3"]
    assert mailbox.take_sync(redis, "tessera:turn:1:steer") == []


async def test_mailbox_take_on_an_async_client_empties_the_box() -> None:
    from core.redis_client import async_client

    mailbox.post(sync_client(), "tessera:turn:2:steer", "7")
    client = async_client()
    try:
        assert await mailbox.take(client, "tessera:turn:2:steer") == ["7"]
        assert await mailbox.take(client, "tessera:turn:2:steer") == []
    finally:
        await client.aclose()


def test_mailbox_refuses_past_its_limit_and_expires() -> None:
    redis = sync_client()
    for n in range(mailbox.MAX_ITEMS):
        mailbox.post(redis, "tessera:turn:3:steer", str(n))
    with pytest.raises(mailbox.Full):
        mailbox.post(redis, "tessera:turn:3:steer", "one more")
    assert 0 < redis.ttl("tessera:turn:3:steer") <= mailbox.TTL_S


# --- sending while an answer runs: the queue --------------------------------------------------


def test_sending_while_an_answer_runs_queues_the_message_in_order(owner: Client, chat: Chat) -> None:
    _running(chat)
    for text in ["second", "third"]:
        response = owner.post(reverse("chat:send", args=[chat.pk]), {"content": text})
        assert response.status_code == 200
        html = response.content.decode()
        assert 'id="pending-box"' in html and text in html
    assert _queued(chat) == ["second", "third"]
    # Not part of the conversation yet: no message, no turn.
    assert Turn.objects.filter(chat=chat).count() == 1
    assert Message.objects.filter(chat=chat).count() == 1


def _version(html: str) -> int:
    import re

    found = re.search(r'id="pending-box"[^>]* data-version="(\d+)"', html)
    assert found, html[:300]
    return int(found.group(1))


def test_every_rendering_of_the_box_is_newer_than_the_one_before(chat: Chat) -> None:
    # Pushes from the web and the worker may arrive in any order; the page keeps the newest.
    _running(chat)
    first, second = _version(pending.box_html(chat)), _version(pending.box_html(chat))
    assert second > first
    # A counter that expired starts again above every number an open tab may still hold.
    sync_client().delete(f"tessera:chat:{chat.pk}:box-version")
    assert _version(pending.box_html(chat)) > second


def _uploaded(owner: Client, name: str, text: str) -> int:
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = owner.post(reverse("files:upload"), {"file": SimpleUploadedFile(name, text.encode())})
    assert response.status_code == 201
    return int(response.json()["id"])


def test_a_queued_message_carries_its_files_and_delivers_them(owner: Client, chat: Chat, user: Any) -> None:
    from toolsets.files.models import Attachment

    turn = _running(chat)
    note = _uploaded(owner, "notes.txt", "The launch moved to Friday.")
    response = owner.post(reverse("chat:send", args=[chat.pk]), {"content": "see file", "attachments": [str(note)]})
    assert response.status_code == 200
    # Shown in the queued item, as a sent message's files are.
    html = response.content.decode()
    assert 'data-testid="message-file"' in html and "notes.txt" in html
    assert PendingMessage.objects.get().attachments == [note]
    assert Attachment.objects.get(pk=note).message is None  # not sent yet

    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.COMPLETED)
    started = pending.after_turn(turn.pk)
    assert started is not None
    message = Message.objects.get(turn=started, role=Message.Role.USER)
    assert Attachment.objects.get(pk=note).message_id == message.pk
    # The model reads it with the message, as when sent directly (here before it was read).
    messages, _ = turn_store.turn_transcript(chat.pk, started.pk, vision=False)
    assert f"“notes.txt” (file_id {note}, Text)" in messages[-1]["content"]


def test_a_waiting_messages_files_pass_the_same_checks(owner: Client, chat: Chat, other_user: Any) -> None:
    turn = _running(chat)
    for view in ("chat:send", "chat:steer"):
        refused = owner.post(reverse(view, args=[chat.pk]), {"content": "see file", "attachments": ["999999"]})
        assert refused.status_code == 400 and "no longer exists" in refused.content.decode()
    theirs = Client()
    theirs.force_login(other_user)
    their_file = _uploaded(theirs, "theirs.txt", "secret")
    stolen = owner.post(reverse("chat:steer", args=[chat.pk]), {"content": "x", "attachments": [str(their_file)]})
    assert stolen.status_code == 400
    assert not PendingMessage.objects.exists() and turn.status == Turn.Status.RUNNING


def test_a_steers_files_reach_the_running_agent_and_stay_with_its_message(owner: Client, chat: Chat) -> None:
    from toolsets.files.models import Attachment

    turn = _running(chat)
    note = _uploaded(owner, "plan.txt", "Step one: penguins.")
    response = owner.post(reverse("chat:steer", args=[chat.pk]), {"content": "Use this", "attachments": [str(note)]})
    assert response.status_code == 200 and "plan.txt" in response.content.decode()
    item = str(PendingMessage.objects.get().pk)  # what the mailbox carries (posted on commit)

    [text] = pending.take_steers(chat.pk, turn.pk, 1, [item])

    assert text.startswith("Use this\n\n[Attached files:") and f"“plan.txt” (file_id {note}, Text)" in text
    message = Message.objects.get(turn=turn, metadata__steered=True)
    assert message.content == "Use this" and Attachment.objects.get(pk=note).message_id == message.pk


def test_a_completed_answer_starts_the_first_queued_message(chat: Chat) -> None:
    turn = _running(chat)
    pending.queue(chat, "second")
    pending.queue(chat, "third")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.COMPLETED)

    started = pending.after_turn(turn.pk)

    assert started is not None and started.status == Turn.Status.QUEUED
    assert started.parent_id == turn.pk
    assert Message.objects.get(turn=started, role=Message.Role.USER).content == "second"
    assert _queued(chat) == ["third"]
    # Still running: the next one waits for it.
    assert pending.after_turn(turn.pk) is None
    Turn.objects.filter(pk=started.pk).update(status=Turn.Status.COMPLETED)
    following = pending.after_turn(started.pk)
    assert following is not None
    assert Message.objects.get(turn=following, role=Message.Role.USER).content == "third"
    assert _queued(chat) == []


@pytest.mark.parametrize("status", [Turn.Status.CANCELLED, Turn.Status.FAILED, Turn.Status.INTERRUPTED])
def test_an_answer_that_did_not_complete_leaves_the_queue_paused(chat: Chat, status: str) -> None:
    turn = _running(chat)
    pending.queue(chat, "second")
    Turn.objects.filter(pk=turn.pk).update(status=status)

    assert pending.after_turn(turn.pk) is None
    assert _queued(chat) == ["second"]
    assert Turn.objects.filter(chat=chat).count() == 1
    # The box now offers to send it.
    assert "pending-send" in pending.box_html(chat)


def test_send_now_runs_a_paused_message_and_is_refused_while_busy(owner: Client, chat: Chat) -> None:
    turn = _running(chat)
    row = pending.queue(chat, "second")
    url = reverse("chat:pending_send", args=[chat.pk, row.pk])
    assert owner.post(url).status_code == 409
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.CANCELLED)

    assert owner.post(url).status_code == 200
    assert Message.objects.filter(chat=chat, content="second", role=Message.Role.USER).exists()
    assert not PendingMessage.objects.exists()
    Turn.objects.filter(chat=chat).update(status=Turn.Status.COMPLETED)
    assert owner.post(url).status_code == 404


def test_edit_and_cancel_a_queued_message(owner: Client, chat: Chat) -> None:
    _running(chat)
    first, second = pending.queue(chat, "second"), pending.queue(chat, "third")
    edit = owner.post(reverse("chat:pending_edit", args=[chat.pk, second.pk]), {"content": "third, edited"})
    assert edit.status_code == 200 and "third, edited" in edit.content.decode()
    assert owner.post(reverse("chat:pending_edit", args=[chat.pk, second.pk]), {"content": "  "}).status_code == 400
    assert owner.post(reverse("chat:pending_cancel", args=[chat.pk, first.pk])).status_code == 200
    assert _queued(chat) == ["third, edited"]
    assert owner.post(reverse("chat:pending_cancel", args=[chat.pk, first.pk])).status_code == 404


# --- steering ------------------------------------------------------------------------------------


def test_steer_posts_to_the_running_turns_mailbox(owner: Client, chat: Chat) -> None:
    _running(chat)
    response = owner.post(reverse("chat:steer", args=[chat.pk]), {"content": "Use metric units"})
    assert response.status_code == 200
    row = PendingMessage.objects.get(chat=chat)
    assert row.kind == Kind.STEER and row.content == "Use metric units"
    assert 'data-kind="steer"' in response.content.decode()


def test_steer_with_nothing_running_is_a_conflict(owner: Client, chat: Chat) -> None:
    response = owner.post(reverse("chat:steer", args=[chat.pk]), {"content": "late"})
    assert response.status_code == 409
    assert not PendingMessage.objects.exists()


@pytest.mark.parametrize("content", ["", "   ", "x" * 100_001])
def test_steer_validates_its_text(owner: Client, chat: Chat, content: str) -> None:
    _running(chat)
    assert owner.post(reverse("chat:steer", args=[chat.pk]), {"content": content}).status_code == 400


def test_taken_steers_become_the_users_messages_in_order(chat: Chat) -> None:
    turn = _running(chat)
    a = pending.steer(chat, turn, "one")
    b = pending.steer(chat, turn, "two")
    cancelled = pending.steer(chat, turn, "never mind")
    pending.cancel(chat, cancelled.pk)

    texts = pending.take_steers(chat.pk, turn.pk, 2, [str(b.pk), str(a.pk), str(cancelled.pk), "junk"])

    assert texts == ["one", "two"]
    steered = Message.objects.filter(turn=turn, metadata__steered=True).order_by("id")
    assert [(m.content, m.step) for m in steered] == [("one", 2), ("two", 2)]
    assert not PendingMessage.objects.exists()
    # Taken once only.
    assert pending.take_steers(chat.pk, turn.pk, 3, [str(a.pk)]) == []
    # The next model call's transcript has them, in order, after the question.
    messages, _ = turn_store.turn_transcript(chat.pk, turn.pk, vision=False)
    assert [m["content"] for m in messages if m["role"] == "user"] == ["First question", "one", "two"]


def test_a_steer_not_taken_goes_to_the_front_of_the_queue_and_runs_next(chat: Chat) -> None:
    turn = _running(chat)
    pending.queue(chat, "queued before")
    pending.steer(chat, turn, "late guidance")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.COMPLETED)

    started = pending.after_turn(turn.pk)

    assert started is not None
    assert Message.objects.get(turn=started, role=Message.Role.USER).content == "late guidance"
    assert _queued(chat) == ["queued before"]


def test_a_stopped_turns_steer_waits_in_the_queue(chat: Chat) -> None:
    turn = _running(chat)
    pending.steer(chat, turn, "late guidance")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.CANCELLED)
    assert pending.after_turn(turn.pk) is None
    assert _queued(chat) == ["late guidance"]


def test_steered_messages_show_on_the_step_that_read_them(owner: Client, chat: Chat) -> None:
    turn = _running(chat)
    Message.objects.create(chat=chat, turn=turn, step=0, role=Message.Role.ASSISTANT, content="Looking.")
    Message.objects.create(
        chat=chat, turn=turn, step=1, role=Message.Role.USER, content="Use **metric**", metadata={"steered": True}
    )
    Message.objects.create(chat=chat, turn=turn, step=1, role=Message.Role.ASSISTANT, content="In metres.")
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.COMPLETED)

    html = owner.get(reverse("chat:detail", args=[chat.pk])).content.decode()

    assert html.count('data-testid="steered"') == 1
    assert "Use **metric**" in html  # the person's words, as they wrote them (escaped, not rendered)
    assert (
        html.index("First question") < html.index("Looking.") < html.index("Use **metric**") < html.index("In metres.")
    )


# --- ownership ---------------------------------------------------------------------------------


def test_every_endpoint_checks_the_owner(client: Client, other_user: Any, chat: Chat) -> None:
    turn = _running(chat)
    row = pending.queue(chat, "mine")
    client.force_login(other_user)
    for url in [
        reverse("chat:steer", args=[chat.pk]),
        reverse("chat:pending_edit", args=[chat.pk, row.pk]),
        reverse("chat:pending_cancel", args=[chat.pk, row.pk]),
        reverse("chat:pending_send", args=[chat.pk, row.pk]),
    ]:
        assert client.post(url, {"content": "theirs"}).status_code == 404
    row.refresh_from_db()
    assert row.content == "mine"
    assert turn.status == Turn.Status.RUNNING


def test_a_pending_message_of_another_chat_is_not_found(owner: Client, chat: Chat, user: Any) -> None:
    other_chat = Chat.objects.create(owner=user)
    _running(other_chat)
    row = pending.queue(other_chat, "elsewhere")
    url = reverse("chat:pending_cancel", args=[chat.pk, row.pk])
    assert owner.post(url).status_code == 404
    assert PendingMessage.objects.filter(pk=row.pk).exists()


@pytest.mark.parametrize("name", ["chat:steer", "chat:pending_edit", "chat:pending_cancel", "chat:pending_send"])
def test_endpoints_need_post(owner: Client, chat: Chat, name: str) -> None:
    args = [chat.pk] if name == "chat:steer" else [chat.pk, 1]
    assert owner.get(reverse(name, args=args)).status_code == 405
