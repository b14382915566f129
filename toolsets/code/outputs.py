"""What a run leaves in the chat: the files the code wrote to /output become the chat's files
(Attachments, read by the files worker like any upload, downloadable by their owner only), and
what the model reads of the run."""

from __future__ import annotations

import io
from typing import Any

from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import Sum

from toolsets.files.attach import clean_name, size_label
from toolsets.files.detect import HEAD_BYTES, Refused, detect
from toolsets.files.models import Attachment, FileLimits

MODEL_OUTPUT_CHARS = 6000


def chat_files(user_id: int, chat_id: int) -> list[dict[str, Any]]:
    """The chat's files its sandbox sees at /data: its owner's, sent in this chat, read."""
    files = Attachment.objects.filter(owner_id=user_id, chat_id=chat_id, message__isnull=False)
    return [{"id": a.pk, "name": a.name, "path": a.file.name} for a in files.order_by("id").only("name", "file")]


def _message_id(turn_id: int | None, chat_id: int) -> int | None:
    """The question the turn answers: files made while answering belong with it."""
    from django.apps import apps

    message = apps.get_model("chat", "Message")
    found = message.objects.filter(chat_id=chat_id, role="user")
    if turn_id is not None:
        mine = found.filter(turn_id=turn_id).order_by("id").values_list("pk", flat=True).first()
        if mine is not None:
            return int(mine)
    latest = found.order_by("-id").values_list("pk", flat=True).first()
    return int(latest) if latest is not None else None


def save_files(user_id: int, chat_id: int, turn_id: int | None, files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    """Stores each written file as the chat's file; each entry says its id, or why it was not kept."""
    limits = FileLimits.load()
    used = Attachment.objects.filter(owner_id=user_id).aggregate(total=Sum("size"))["total"] or 0
    message_id = _message_id(turn_id, chat_id)
    saved: list[dict[str, Any]] = []
    for raw_name, data in files:
        name = clean_name(raw_name)
        entry: dict[str, Any] = {"name": name, "size": len(data), "size_label": size_label(len(data))}
        saved.append(entry)
        if not data:
            entry["refused"] = "empty"
            continue
        if len(data) > limits.max_file_bytes or used + len(data) > limits.max_total_bytes:
            entry["refused"] = "over your storage limit"
            continue
        try:
            found = detect(data[:HEAD_BYTES], io.BytesIO(data))
        except Refused:
            entry["refused"] = "a type Tessera does not keep"
            continue
        attachment = Attachment(
            owner_id=user_id,
            chat_id=chat_id,
            message_id=message_id,
            name=name,
            size=len(data),
            kind=found.family if found.family != "text" else Attachment.Kind.TEXT,
            content_type=found.content_type,
        )
        attachment.file.save(name, ContentFile(data), save=False)
        attachment.save()
        if message_id is not None:
            attachment.messages.add(message_id)
        used += len(data)
        entry["id"] = attachment.pk
        _read_later(attachment.pk)
    return saved


def _read_later(attachment_id: int) -> None:
    from toolsets.files.tasks import read_attachment

    transaction.on_commit(lambda: read_attachment.delay(attachment_id))


def model_text(result: dict[str, Any]) -> str:
    """The run as the model reads it: output (shortened), the error, figures and files."""
    parts: list[str] = []
    for label in ("notice", "ended"):
        if result.get(label):
            parts.append(str(result[label]))
    for stream in ("stdout", "stderr"):
        text = str(result.get(stream) or "")
        if text:
            if len(text) > MODEL_OUTPUT_CHARS:
                half = MODEL_OUTPUT_CHARS // 2
                text = f"{text[:half]}\n[… {len(text) - MODEL_OUTPUT_CHARS} characters left out …]\n{text[-half:]}"
            parts.append(f"{stream}:\n{text}")
    if result.get("error"):
        parts.append(f"The code failed: {result['error']}")
    if result.get("figures"):
        parts.append(f"{len(result['figures'])} figure(s) shown to the user.")
    for entry in result.get("files") or []:
        if "id" in entry:
            parts.append(f"Saved {entry['name']} ({entry['size_label']}) as the chat's file #{entry['id']}.")
        else:
            parts.append(f"Not kept: {entry['name']} ({entry.get('refused', 'too large')}).")
    for entry in result.get("skipped") or []:
        parts.append(f"Not kept: {entry.get('name')} (over the limit of what a call returns).")
    if not parts:
        parts.append("The code ran and printed nothing.")
    return "\n".join(parts)
