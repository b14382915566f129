"""Through real worker processes, as `manage.py serve` runs them: a worker for turns, and a files
worker reading on its own queue with one user's files kept to their share. One user's pile of
uploads neither holds another user's file behind it nor reaches the turns' worker."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile

from tests.processes import BOOT_S, Processes, wait_until
from toolsets.files.models import Attachment

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _photo(seed: int, side: int = 1200) -> bytes:
    from PIL import Image

    image = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=92)
    return out.getvalue()


def _stored(user: Any, name: str, data: bytes) -> Attachment:
    # As an upload stores it, without sending the task to the test session's broker.
    attachment = Attachment(owner=user, name=name, size=len(data), kind="image", content_type="image/jpeg")
    attachment.file.save(name, ContentFile(data), save=False)
    attachment.save()
    return attachment


def test_a_pile_of_uploads_does_not_hold_another_users_file(tmp_path: Path, user: Any, other_user: Any) -> None:
    own = Processes(tmp_path)
    own.start_redis()
    try:
        own.worker("turns", concurrency=4, options=["--queues", "celery"])
        own.worker("files", concurrency=2, options=["--queues", "files"], TESSERA_FILE_READS_PER_USER="1")
        broker = own.broker()
        both = lambda: len(broker.control.inspect(timeout=1).active_queues() or {}) == 2  # noqa: E731
        wait_until(both, BOOT_S, "the workers did not start")
        pile = [_stored(user, f"photo-{n}.jpg", _photo(n)) for n in range(6)]
        mine = _stored(other_user, "mine.jpg", _photo(99))
        for attachment in [*pile, mine]:
            broker.send_task("files.read_attachment", args=[attachment.pk], queue="files")

        def done(ids: list[int]) -> bool:
            return not Attachment.objects.filter(pk__in=ids, status=Attachment.Status.PENDING).exists()

        wait_until(lambda: done([mine.pk]), 120, "the other user's file was not read")
        finished_pile = Attachment.objects.filter(pk__in=[a.pk for a in pile]).exclude(status="pending").count()
        # Queued last, read while the pile was still being read: one of the pile's at a time.
        assert finished_pile < len(pile)
        wait_until(lambda: done([a.pk for a in pile]), 180, "the pile was not read")
        assert set(Attachment.objects.values_list("status", flat=True)) == {"ready"}
        # Only the files worker read them; the turns' worker never took one.
        received = "Task files.read_attachment["
        assert received not in own.log("turns").read_text()
        assert received in own.log("files").read_text()
    finally:
        own.close()
