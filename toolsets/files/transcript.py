"""What the model is told about a message's files: a note naming each (with the id the Files
tools take), and for a model that can see images, the images themselves as image parts."""

from __future__ import annotations

import base64
import io
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from core.documents.images import describe_image

from .models import Attachment

# Where a user message's text ends and the notes on its files begin, in what the model reads.
FILES_MARK = "\n\n[Attached files:"

log = logging.getLogger(__name__)

# Images go to the model from the latest few messages that have any: older ones are named only
# (every turn resends the transcript, and an image costs a provider hundreds of tokens).
IMAGE_MESSAGES = 3
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 4 * 1024 * 1024
MAX_IMAGE_SIDE = 2048
# Text files at most this large are given to the model whole, in the files note.
INLINE_TEXT_BYTES = 4000
INLINE_KINDS = (Attachment.Kind.TEXT, Attachment.Kind.MARKDOWN, Attachment.Kind.CSV, Attachment.Kind.JSON)


def model_sees_images(model: str) -> bool:
    """LiteLLM's model map says; the offline demo model "sees" (it describes images itself)."""
    if model.startswith("demo/"):
        return True
    try:
        import litellm

        return bool(litellm.supports_vision(model=model))
    except Exception:  # an unknown model: assume text only
        return False


def _note(attachment: Attachment, shown: bool, vision: bool) -> str:
    kind = attachment.get_kind_display()
    if attachment.is_image:
        facts = attachment.facts
        size = f"{facts['width']}×{facts['height']} {facts['format']}" if facts.get("width") else kind
        described = describe_image(facts) if facts.get("width") else "nothing (it could not be read)"
        if shown:
            how = "shown below"
        elif vision:
            how = "not shown again; what Tessera read of it: " + described
        else:
            how = "this model cannot see images; what Tessera read of it: " + described
        return f"- “{attachment.name}” (file_id {attachment.pk}, image, {size}): {how}"
    if attachment.status == Attachment.Status.FAILED:
        return f"- “{attachment.name}” (file_id {attachment.pk}, {kind}): could not be read ({attachment.error})"
    count = attachment.page_count
    pages = f", {count} page{'s' if count != 1 else ''}" if attachment.kind == Attachment.Kind.PDF else ""
    short = _short_text(attachment)
    if short is not None:
        # A short text (a note, an MCP server's resource) costs less whole than a tool call to
        # read it: the model gets it here, fenced so that it reads as the file's, not the user's.
        return f"- “{attachment.name}” (file_id {attachment.pk}, {kind}), in full:\n<file>\n{short}\n</file>"
    return f"- “{attachment.name}” (file_id {attachment.pk}, {kind}{pages}): read it with the Files tools"


def _short_text(attachment: Attachment) -> str | None:
    """The whole text of a small, read text file; None for anything else. Its size is checked
    first: only a small file's text (deferred by the transcript's query) is loaded."""
    if attachment.kind not in INLINE_KINDS or attachment.size > INLINE_TEXT_BYTES:
        return None
    if attachment.status != Attachment.Status.READY:
        return None
    text = attachment.text
    if not text.strip() or len(text) > INLINE_TEXT_BYTES:
        return None
    return text.replace("</file>", "<\\/file>")


def attachments_of(rows: Sequence[Any]) -> dict[int, list[Attachment]]:
    """The files of each user message among `rows`, by message id, in one query (none when no
    row is a user message)."""
    user_ids = [row.pk for row in rows if row.role == "user"]
    if not user_ids:
        return {}
    by_message: dict[int, list[Attachment]] = defaultdict(list)
    carried = Attachment.messages.through.objects.filter(message_id__in=user_ids).select_related("attachment")
    for row in carried.defer("attachment__text", "attachment__thumbnail").order_by("attachment_id"):
        by_message[row.message_id].append(row.attachment)
    return by_message


def with_files(
    rows: Sequence[Any],
    messages: list[dict[str, Any]],
    vision: bool,
    by_message: dict[int, list[Attachment]] | None = None,
) -> list[dict[str, Any]]:
    """`messages` (the provider shape of `rows`, in order) with each user message's files added
    (`by_message`: what `attachments_of(rows)` found, when the caller has it already)."""
    if by_message is None:
        by_message = attachments_of(rows)
    if not by_message:
        return messages
    user_ids = [row.pk for row in rows if row.role == "user"]
    with_images = [pk for pk in user_ids if any(a.is_image for a in by_message.get(pk, []))]
    show_from = set(with_images[-IMAGE_MESSAGES:]) if vision else set()
    budget = MAX_IMAGES
    out = []
    for row, message in zip(rows, messages, strict=True):
        files = by_message.get(row.pk)
        if not files:
            out.append(message)
            continue
        parts: list[dict[str, Any]] = []
        lines = []
        for attachment in files:
            shown = False
            if attachment.is_image and row.pk in show_from and budget and attachment.status == Attachment.Status.READY:
                url = image_data_url(attachment)
                if url:
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                    budget -= 1
                    shown = True
            lines.append(_note(attachment, shown, vision))
        text = f"{message.get('content') or ''}{FILES_MARK}\n" + "\n".join(lines) + "]"
        content: Any = [{"type": "text", "text": text}, *parts] if parts else text
        out.append({**message, "content": content})
    return out


def image_data_url(attachment: Attachment) -> str:
    """The image as a data: URL, made smaller first when it is large."""
    try:
        with attachment.file.open("rb") as stream:
            data = stream.read(attachment.size + 1)
        facts = attachment.facts
        big = max(facts.get("width", 0), facts.get("height", 0)) > MAX_IMAGE_SIDE
        if len(data) > MAX_IMAGE_BYTES or big:
            data, mime = _shrink(data)
        else:
            mime = attachment.content_type
    except Exception:  # a missing object in the bucket: the note still names it
        log.warning("Could not load image %s for the model", attachment.pk, exc_info=True)
        return ""
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _shrink(data: bytes) -> tuple[bytes, str]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        image.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE))
        out = io.BytesIO()
        image.convert("RGB").save(out, "JPEG", quality=85)
    return out.getvalue(), "image/jpeg"


def image_notice(turn_id: int, rows: Sequence[Any], by_message: dict[int, list[Attachment]], vision: bool) -> str:
    """What the person is told when the images of their question (turn `turn_id`'s user
    messages among `rows`) cannot reach the model."""
    if vision:
        return ""
    asked = [row.pk for row in rows if row.role == "user" and row.turn_id == turn_id]
    images = sorted((a for pk in asked for a in by_message.get(pk, []) if a.is_image), key=lambda a: a.pk)
    names = list(dict.fromkeys(a.name for a in images))
    if not names:
        return ""
    listed = ", ".join(f"“{name}”" for name in names[:3]) + (" and others" if len(names) > 3 else "")
    return f"This model cannot see images: {listed} stayed stored, and the model got only their description."
