"""Uploads and their place in a chat: checked against the limits and the type at upload, claimed
by the message they are sent with."""

from __future__ import annotations

import os
import re
import unicodedata
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.db import transaction
from django.db.models import Sum

from .detect import HEAD_BYTES, Refused, detect
from .models import Attachment, FileLimits

__all__ = [
    "Refused",
    "SizeLimit",
    "TooLarge",
    "accept",
    "carry",
    "check_declared_size",
    "claim",
    "clean_name",
    "link",
    "size_label",
]

MAX_NAME = 200
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]")


def size_label(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def clean_name(name: str) -> str:
    """The name to show: its last path part, without control characters, at most MAX_NAME."""
    name = unicodedata.normalize("NFC", os.path.basename(name.replace("\\", "/")))
    name = " ".join(_UNSAFE.sub("", name).split()).strip(". ")
    if len(name) > MAX_NAME:
        stem, ext = os.path.splitext(name)
        name = stem[: MAX_NAME - len(ext[:20]) - 1] + "…" + ext[:20]
    return name or "file"


class TooLarge(Refused):
    """Over a size limit (HTTP 413 rather than 400)."""


def check_declared_size(content_length: Any, limits: FileLimits) -> None:
    """Refuses an upload by its request's declared length, before its body is read."""
    try:
        length = int(content_length or 0)
    except (TypeError, ValueError):
        return
    if length > limits.max_file_bytes + 64 * 1024:
        raise TooLarge(f"The file is larger than {limits.max_file_mb} MB, the most Tessera accepts for one file.")


class SizeLimit(FileUploadHandler):
    """Counts an upload's bytes as the multipart parser hands them over, before the next handler
    writes them anywhere, and stops the parse once the file is over the limit."""

    def __init__(self, limit: int, request: Any = None) -> None:
        super().__init__(request)
        self.limit = limit
        self.exceeded = False
        self.name = ""

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.name = clean_name(self.file_name or "")

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler makes the file


def accept(user_id: int, upload: UploadedFile[bytes], limits: FileLimits) -> Attachment:
    """Stores an upload for its owner, or raises Refused (TooLarge) with the reason."""
    name = clean_name(upload.name or "")
    size = upload.size or 0
    if size == 0:
        raise Refused(f"“{name}” is empty.")
    if size > limits.max_file_bytes:
        raise TooLarge(f"“{name}” is {size_label(size)}; a file can be at most {limits.max_file_mb} MB.")
    used = Attachment.objects.filter(owner_id=user_id).aggregate(total=Sum("size"))["total"] or 0
    if used + size > limits.max_total_bytes:
        raise TooLarge(
            f"“{name}” does not fit: your files use {size_label(used)} of your {limits.max_total_mb_per_user} MB. "
            "Delete chats with files you no longer need."
        )
    upload.seek(0)
    head = upload.read(HEAD_BYTES)
    found = detect(head, upload.file)
    upload.seek(0)
    attachment = Attachment(
        owner_id=user_id,
        name=name,
        size=size,
        kind=found.family if found.family != "text" else Attachment.Kind.TEXT,
        content_type=found.content_type,
    )
    attachment.file.save(name, upload, save=False)
    attachment.save()

    from .tasks import read_attachment

    transaction.on_commit(lambda: read_attachment.delay(attachment.pk))
    return attachment


def claim(user_id: int, raw_ids: list[str]) -> list[Attachment]:
    """The files a message is being sent with: the sender's own, not sent before, read without
    error, and no more than the limit. Raises Refused with what is wrong."""
    if not raw_ids:
        return []
    try:
        ids = list(dict.fromkeys(int(value) for value in raw_ids))
    except (TypeError, ValueError) as exc:
        raise Refused("The attached files are not valid; remove them and attach them again.") from exc
    limits = FileLimits.load()
    if len(ids) > limits.max_files_per_message:
        raise Refused(f"A message can carry at most {limits.max_files_per_message} files; remove some.")
    if any(not 0 < value < 2**63 for value in ids):
        raise Refused("One of the attached files no longer exists; remove it and attach it again.")
    found = {a.pk: a for a in Attachment.objects.filter(owner_id=user_id, pk__in=ids, message__isnull=True)}
    missing = [value for value in ids if value not in found]
    if missing:
        raise Refused("One of the attached files no longer exists; remove it and attach it again.")
    failed = [a.name for a in found.values() if a.status == Attachment.Status.FAILED]
    if failed:
        raise Refused(f"“{failed[0]}” could not be read; remove it before sending.")
    return [found[value] for value in ids]


def link(attachments: list[Attachment], message: Any) -> None:
    """Attaches the claimed files to the message (inside the transaction that creates it), and
    turns the Files tools on for the chat: whoever attaches a file wants it read."""
    if not attachments:
        return
    Attachment.objects.filter(pk__in=[a.pk for a in attachments], message__isnull=True).update(
        message=message, chat_id=message.chat_id
    )
    _carried_by(message, [a.pk for a in attachments])
    chat = message.chat
    from .tools import toolset

    selection = dict(chat.enabled_tools or {})
    if set(selection.get(toolset.id, [])) != {t.name for t in toolset.tools}:
        selection[toolset.id] = [t.name for t in toolset.tools]
        chat.enabled_tools = selection
        chat.save(update_fields=["enabled_tools"])


def carry(source: Any, message: Any) -> None:
    """A new version of a question (edited, or answered again) keeps the files the question was
    sent with: the same stored files, now on both messages."""
    ids = list(Attachment.messages.through.objects.filter(message_id=source.pk).values_list("attachment_id", flat=True))
    _carried_by(message, ids)


def _carried_by(message: Any, attachment_ids: list[int]) -> None:
    through = Attachment.messages.through
    rows = [through(attachment_id=pk, message_id=message.pk) for pk in attachment_ids]
    through.objects.bulk_create(rows, ignore_conflicts=True)
