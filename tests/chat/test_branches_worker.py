"""Through the real worker: after an edit, the provider receives only the branch the chat shows
(a local OpenAI-compatible server records every request)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from chat.models import Chat, LLMModel, Message, Turn
from tests.providers.replay import ReplayServer, Reply
from toolsets.files.models import Attachment

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


def _upload(client: Client, name: str, data: bytes) -> int:
    response = client.post(reverse("files:upload"), {"file": SimpleUploadedFile(name, data)})
    assert response.status_code == 201, response.content
    file_id = int(response.json()["id"])
    deadline = time.monotonic() + 30
    while Attachment.objects.get(pk=file_id).status == Attachment.Status.PENDING:
        assert time.monotonic() < deadline, "the worker did not read the file"
        time.sleep(0.1)
    return file_id


def _files_note(request: Any) -> str:
    question = [m for m in request.messages if m["role"] == "user"][-1]["content"]
    return question.split("[Attached files:", 1)[1] if "[Attached files:" in question else ""


def test_an_edited_or_regenerated_question_keeps_its_files(stack: Any, user: Any, provider: ReplayServer) -> None:
    model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")
    chat = Chat.objects.create(owner=user, model=model, enabled_tools={})
    client = Client()
    client.force_login(user)
    provider.play(_answer("One."), _answer("Two."), _answer("Three."))
    notes = _upload(client, "notes.txt", b"The meeting moved to Thursday.\n")
    table = _upload(client, "table.csv", b"city,people\nLyon,3\nOslo,5\n")

    sent = client.post(reverse("chat:send", args=[chat.pk]), {"content": "Read these", "attachments": [notes, table]})
    assert sent.status_code == 200
    first = _wait_done(chat)
    edited = client.post(reverse("chat:edit", args=[first.pk]), {"content": "Read these, briefly"})
    assert edited.status_code == 200
    second = _wait_done(chat)
    again = client.post(reverse("chat:regenerate", args=[second.pk]), {})
    assert again.status_code == 200
    third = _wait_done(chat)

    # Every version's request names both files, as the first did.
    for request in provider.requests:
        note = _files_note(request)
        assert f"“notes.txt” (file_id {notes}" in note and f"“table.csv” (file_id {table}" in note, note
    # The versions show the chips (the page shows the newest), and the files are stored once.
    page = client.get(reverse("chat:detail", args=[chat.pk])).content.decode()
    assert page.count('data-testid="message-file"') == 2 and "notes.txt" in page and "table.csv" in page
    assert edited.content.decode().count('data-testid="message-file"') == 2
    assert Attachment.objects.filter(owner=user).count() == 2
    for turn in (first, second, third):
        question = Message.objects.get(turn=turn, role=Message.Role.USER)
        assert sorted(question.files.values_list("pk", flat=True)) == sorted([notes, table])

    # Deleting the chat deletes the files, whichever versions carried them.
    stored = [str(Attachment.objects.get(pk=pk).file.name) for pk in (notes, table)]
    assert client.post(reverse("chat:delete", args=[chat.pk])).status_code in (200, 204, 302)
    assert not Attachment.objects.filter(pk__in=[notes, table]).exists()
    storage = Attachment._meta.get_field("file").storage  # type: ignore[attr-defined]
    assert not any(storage.exists(name) for name in stored)
