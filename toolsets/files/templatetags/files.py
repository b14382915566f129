from __future__ import annotations

from typing import Any

from django import template
from django.db.models import Exists, OuterRef, Prefetch, QuerySet, prefetch_related_objects

from ..models import Attachment, FileLimits

register = template.Library()

LIGHT_FIELDS = ("text", "thumbnail")


def with_file_flag(messages: QuerySet[Any]) -> QuerySet[Any]:
    """`messages` each with `has_files`: `prefetch` then skips its query when none has any (most
    pages: files are the exception)."""
    flagged: QuerySet[Any] = messages.annotate(
        has_files=Exists(Attachment.messages.through.objects.filter(message_id=OuterRef("pk")))
    )
    return flagged


def prefetch(messages: list[Any]) -> None:
    """Loads the files of many messages in one query (without their text), for a page. Messages
    flagged by `with_file_flag` as having none are shown with none, without a query."""
    having = []
    for message in messages:
        if getattr(message, "has_files", True):
            having.append(message)
        else:
            shown_with(message, [])
    if having:
        light = Attachment.objects.defer(*LIGHT_FIELDS).order_by("id")
        prefetch_related_objects(having, Prefetch("files", queryset=light))


def shown_with(message: Any, files: list[Any]) -> None:
    """`message` is shown with `files` (a message just sent: its files are at hand), as if
    prefetched: `message_files` then reads no more."""
    message._prefetched_objects_cache = {**getattr(message, "_prefetched_objects_cache", {}), "files": files}


@register.inclusion_tag("files/_message_files.html")
def message_files(message: Any) -> dict[str, Any]:
    """The chips of a user message's files: prefetched on a page, one light query otherwise."""
    if message is None or not getattr(message, "pk", None):
        return {"files": []}
    cached = getattr(message, "_prefetched_objects_cache", {}).get("files")
    if cached is not None:
        return {"files": list(cached)}
    return {"files": list(Attachment.objects.filter(messages=message).defer(*LIGHT_FIELDS).order_by("id"))}


@register.simple_tag
def file_limits() -> FileLimits:
    return FileLimits.load()


@register.filter
def file_size(size: int) -> str:
    """The size as the composer's chips show it ("915 B", "12 KB", "3.4 MB")."""
    from ..attach import size_label

    return size_label(int(size or 0))


BADGES = {"text": "TXT", "markdown": "MD", "csv": "CSV", "json": "JSON", "html": "HTML", "pdf": "PDF", "docx": "DOCX"}


@register.filter
def file_badge(kind: str) -> str:
    """The few letters on a file's chip when it has no thumbnail."""
    return BADGES.get(kind, "IMG" if kind == "image" else "FILE")
