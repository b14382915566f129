"""files.read_attachment: each file is read once in a child; a reading whose worker died is
tried once more, then the file fails for good — never a redelivery loop."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from toolsets.files import attach, sandbox
from toolsets.files.models import Attachment, FileLimits
from toolsets.files.tasks import MAX_READ_ATTEMPTS, read_attachment

from . import samples

pytestmark = pytest.mark.django_db


def _uploaded(user: Any, data: bytes = b"hello there", name: str = "a.txt") -> Attachment:
    return attach.accept(user.pk, SimpleUploadedFile(name, data), FileLimits.load())


def test_a_file_is_read_once(user: Any) -> None:
    attachment = _uploaded(user)
    read_attachment(attachment.pk)
    read_attachment(attachment.pk)  # a redelivered message finds it read

    attachment.refresh_from_db()
    assert (attachment.status, attachment.text, attachment.read_attempts) == ("ready", "hello there", 1)


def test_a_reading_whose_worker_died_is_tried_once_more(user: Any) -> None:
    attachment = _uploaded(user)
    Attachment.objects.filter(pk=attachment.pk).update(read_attempts=1)  # started, never finished

    read_attachment(attachment.pk)

    attachment.refresh_from_db()
    assert (attachment.status, attachment.read_attempts) == ("ready", 2)


def test_a_file_that_keeps_killing_its_reader_fails_for_good(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    attachment = _uploaded(user)
    Attachment.objects.filter(pk=attachment.pk).update(read_attempts=MAX_READ_ATTEMPTS)
    monkeypatch.setattr(sandbox, "run", lambda *a, **k: pytest.fail("read a third time"))

    read_attachment(attachment.pk)

    attachment.refresh_from_db()
    assert attachment.status == "failed"
    assert attachment.error == "Reading this file stopped the process reading it, so it was not tried again."


def test_a_child_killed_for_memory_fails_the_file_once(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    attachment = _uploaded(user, samples.pdf(["Hello"]), "a.pdf")
    monkeypatch.setattr(sandbox, "MEMORY_MB", 40)  # too little to start the reader

    read_attachment(attachment.pk)  # returns normally: the task is acknowledged, not redelivered

    attachment.refresh_from_db()
    assert attachment.status == "failed" and "more memory than Tessera allows" in attachment.error
    assert attachment.read_attempts == 1
