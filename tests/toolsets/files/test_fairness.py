"""Fair use of the readers: at most FILE_READS_PER_USER of one user's files are read at once
(the next goes back to the end of the queue), and at most UPLOADS_PER_MINUTE uploads a minute."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from core.redis_client import sync_client
from toolsets.files import attach, tasks
from toolsets.files.models import Attachment, FileLimits

pytestmark = pytest.mark.django_db


def test_a_user_gets_their_share_of_readers_and_no_more(settings: Any) -> None:
    settings.FILE_READS_PER_USER = 2
    with (
        tasks.reading_slot(7, 1, 60) as first,
        tasks.reading_slot(7, 2, 60) as second,
        tasks.reading_slot(7, 3, 60) as third,
        tasks.reading_slot(8, 4, 60) as someone_else,
    ):
        assert (first, second, third, someone_else) == (True, True, False, True)
    with tasks.reading_slot(7, 3, 60) as later:
        assert later  # the first two were released


def test_a_slot_whose_reader_died_stops_counting(settings: Any) -> None:
    settings.FILE_READS_PER_USER = 1
    # A reading that started long ago and never let go (its worker was killed).
    sync_client().zadd("tessera:files:reading:7", {"99": time.time() - 3600})
    with tasks.reading_slot(7, 1, 60) as admitted:
        assert admitted


def test_a_reading_over_the_users_share_goes_back_to_the_queue(
    settings: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.FILE_READS_PER_USER = 1
    attachment = attach.accept(user.pk, SimpleUploadedFile("a.txt", b"hello"), FileLimits.load())
    sync_client().zadd(f"tessera:files:reading:{user.pk}", {"1234": time.time()})  # one being read
    requeued: list[float] = []

    class Requeued(Exception):
        pass

    def retry(*, countdown: float) -> None:
        requeued.append(countdown)
        raise Requeued

    monkeypatch.setattr(tasks.read_attachment, "retry", retry)
    with pytest.raises(Requeued):
        tasks.read_attachment(attachment.pk)

    attachment.refresh_from_db()
    assert requeued == [tasks.REQUEUE_S]
    assert (attachment.status, attachment.read_attempts) == ("pending", 0)


def test_uploads_per_minute_are_limited(settings: Any, user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.UPLOADS_PER_MINUTE = 3
    # All four in one window of the fixed-window counter, whatever the clock says when it runs.
    from types import SimpleNamespace

    from core import ratelimit

    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))
    client = Client()
    client.force_login(user)
    for n in range(3):
        response = client.post(reverse("files:upload"), {"file": SimpleUploadedFile(f"{n}.txt", b"hello")})
        assert response.status_code == 201
    refused = client.post(reverse("files:upload"), {"file": SimpleUploadedFile("3.txt", b"hello")})
    assert refused.status_code == 429
    assert refused.json()["error"] == (
        "You uploaded 3 files in the last minute, the most Tessera takes; try again in a minute."
    )
    assert Attachment.objects.count() == 3
