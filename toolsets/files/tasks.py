from __future__ import annotations

import logging

from celery import shared_task

from core.redact import redact

from .extract import ExtractError, Limits
from .models import Attachment, FileLimits
from .sandbox import run

log = logging.getLogger(__name__)


@shared_task(name="files.read_attachment", acks_late=True, reject_on_worker_lost=True)
def read_attachment(attachment_id: int) -> None:
    """Reads an uploaded file's text and facts in a sandboxed child process, off the request path."""
    attachment = Attachment.objects.filter(pk=attachment_id, status=Attachment.Status.PENDING).first()
    if attachment is None:
        return  # deleted meanwhile, or already read (a redelivered message)
    limits = FileLimits.load()
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


def _fail(attachment_id: int, message: str) -> None:
    Attachment.objects.filter(pk=attachment_id, status=Attachment.Status.PENDING).update(
        status=Attachment.Status.FAILED, error=message[:500]
    )
