from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db.models import F

from core.documents.extract import ExtractError, Limits
from core.redact import redact
from core.redis_client import sync_client

from .models import Attachment, FileLimits
from .sandbox import run

log = logging.getLogger(__name__)


# A reading that never finished (its worker was killed) is tried again once, then failed: a file
# that kills whatever reads it must not be redelivered for ever.
MAX_READ_ATTEMPTS = 2


# A user whose files already take their share of the readers has the next one put back at the
# end of the queue, this long after: other users' files are read in between.
REQUEUE_S = 1.0


# Celery ships no type information: its decorator would leave the task untyped.
@shared_task(  # type: ignore[untyped-decorator]
    name="files.read_attachment", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None
)
def read_attachment(self: Any, attachment_id: int) -> None:
    """Reads an uploaded file's text and facts in a sandboxed child process, off the request path."""
    pending = Attachment.objects.filter(pk=attachment_id, status=Attachment.Status.PENDING)
    owner_id = pending.values_list("owner_id", flat=True).first()
    if owner_id is None:
        return  # deleted meanwhile, or already read (a redelivered message)
    limits = FileLimits.load()
    with reading_slot(owner_id, attachment_id, float(limits.extract_seconds)) as admitted:
        if not admitted:
            raise self.retry(countdown=REQUEUE_S)
        _read(attachment_id, pending, limits)


def _read(attachment_id: int, pending: Any, limits: FileLimits) -> None:
    if not pending.filter(read_attempts__lt=MAX_READ_ATTEMPTS).update(read_attempts=F("read_attempts") + 1):
        if pending.exists():
            log.warning("File %s stopped its reader %d times; not read again", attachment_id, MAX_READ_ATTEMPTS)
            _fail(attachment_id, "Reading this file stopped the process reading it, so it was not tried again.")
        return  # deleted meanwhile, or given up on
    attachment = pending.first()
    if attachment is None:
        return
    try:
        with attachment.file.open("rb") as stream:
            data = stream.read(limits.max_file_bytes + 1)
        if len(data) > limits.max_file_bytes:
            raise ExtractError(f"The file is larger than {limits.max_file_mb} MB.")
        result = run(
            data,
            attachment.kind if attachment.kind in ("pdf", "docx", "image") else "text",
            attachment.name,
            Limits(max_pages=limits.max_pages, max_chars=limits.max_text_mb * 1024 * 1024),
            timeout_s=float(limits.extract_seconds),
        )
    except ExtractError as exc:
        _fail(attachment_id, str(exc))
        return
    except Exception as exc:
        log.exception("Reading file %s failed", attachment_id)
        _fail(attachment_id, redact(f"This file could not be read ({type(exc).__name__})."))
        return
    Attachment.objects.filter(pk=attachment_id, status=Attachment.Status.PENDING).update(
        status=Attachment.Status.READY,
        kind=result.kind,
        text=result.text,
        page_starts=result.page_starts,
        facts=result.facts,
        thumbnail=result.thumbnail,
        error="",
    )


# Admits a reading when its owner has fewer than ARGV[3] running: one atomic step, so readers
# on several hosts never admit more. Entries are scored by when they started, and one older than
# a reading can last (its worker died) no longer counts.
_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])))
return 1
"""


@contextmanager
def reading_slot(owner_id: int, attachment_id: int, longest_s: float) -> Iterator[bool]:
    """One of the owner's FILE_READS_PER_USER readings at once, across every files worker."""
    redis = sync_client()
    key = f"tessera:files:reading:{owner_id}"
    stale_after = longest_s + 60  # a reading's time limit, and its start and write-up
    limit = max(1, int(settings.FILE_READS_PER_USER))
    admitted = bool(redis.eval(_ADMIT, 1, key, time.time(), stale_after, limit, attachment_id))
    try:
        yield admitted
    finally:
        if admitted:
            redis.zrem(key, attachment_id)


def _fail(attachment_id: int, message: str) -> None:
    Attachment.objects.filter(pk=attachment_id, status=Attachment.Status.PENDING).update(
        status=Attachment.Status.FAILED, error=message[:500]
    )
