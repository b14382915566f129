"""Reading a user's files for the Files tools and the preview page: ownership, pages, ranges,
passages. Every lookup is filtered by the owner; another user's id reads as "no such file"."""

from __future__ import annotations

import bisect
import re
from typing import Any

from django.db.models import Q, QuerySet
from django.urls import reverse

from toolsets.base import ToolFailure

from .models import Attachment

MAX_READ = 20_000
DEFAULT_READ = 8_000
PASSAGE_RADIUS = 240
MAX_SEARCH_FILES = 50
MAX_WORDS = 8


def owned(user_id: int | None) -> QuerySet[Attachment]:
    if user_id is None:
        raise ToolFailure("Files can only be read on behalf of a signed-in user.", error_type="permission_denied")
    return Attachment.objects.filter(owner_id=user_id)


def get_file(user_id: int | None, file_id: int) -> Attachment:
    found = owned(user_id).filter(pk=file_id).first() if 0 < file_id < 2**63 else None
    if found is None:
        raise LookupError(f"There is no file with id {file_id}. list_files shows the files you can read.")
    return found


def page_of(attachment: Attachment, offset: int) -> int:
    starts = attachment.page_starts or [0]
    return max(1, bisect.bisect_right(starts, offset))


def link(attachment: Attachment, *, page: int | None = None, start: int | None = None, end: int | None = None) -> str:
    url = reverse("files:preview", args=[attachment.pk])
    if start is not None and end is not None:
        return f"{url}?from={start}&to={end}#passage"
    if page is not None and attachment.page_count > 1:
        return f"{url}#page-{page}"
    return url


def describe(attachment: Attachment) -> dict[str, Any]:
    """A file as list_files shows it."""
    item: dict[str, Any] = {
        "file_id": attachment.pk,
        "name": attachment.name,
        "type": attachment.get_kind_display(),
        "size": attachment.size,
        "status": attachment.status,
        "chat_id": attachment.chat_id,
    }
    if attachment.status == Attachment.Status.FAILED:
        item["error"] = attachment.error
    if attachment.kind == Attachment.Kind.PDF:
        item["pages"] = attachment.page_count
    if attachment.status == Attachment.Status.READY:
        item["characters"] = len(attachment.text)
    if attachment.kind == Attachment.Kind.CSV:
        item["columns"] = attachment.facts.get("columns", [])
        item["rows"] = attachment.facts.get("rows", 0)
    if attachment.is_image and attachment.status == Attachment.Status.READY:
        item["description"] = attachment.text
    return item


def readable(attachment: Attachment) -> None:
    if attachment.status == Attachment.Status.PENDING:
        raise ToolFailure(f"“{attachment.name}” is still being read; try again in a moment.", retryable=True)
    if attachment.status == Attachment.Status.FAILED:
        raise ToolFailure(f"“{attachment.name}” could not be read: {attachment.error}")


def read_range(attachment: Attachment, page: int | None, start: int | None, length: int | None) -> dict[str, Any]:
    readable(attachment)
    text = attachment.text
    starts = attachment.page_starts or [0]
    pages = len(starts)
    length = max(1, min(length or DEFAULT_READ, MAX_READ))
    if page is not None:
        if not 1 <= page <= pages:
            noun = "page" if pages == 1 else "pages"
            raise ValueError(f"page: “{attachment.name}” has {pages} {noun}; ask for 1 to {pages}.")
        page_start = starts[page - 1]
        page_end = starts[page] - 2 if page < pages else len(text)
        begin = page_start + max(0, start or 0)
        end = min(page_end, begin + length)
    else:
        begin = max(0, start or 0)
        if begin > len(text):
            raise ValueError(f"start: “{attachment.name}” has {len(text):,} characters; start below that.")
        end = min(len(text), begin + length)
    result: dict[str, Any] = {
        "file_id": attachment.pk,
        "name": attachment.name,
        "type": attachment.get_kind_display(),
        "start": begin,
        "end": end,
        "total_characters": len(text),
        "text": text[begin:end],
    }
    if pages > 1:
        result["pages"] = pages
        if page is not None:
            result["page"] = page
        else:
            # A character range may run over several pages: the first and the last it touches.
            result["first_page"] = page_of(attachment, begin)
            result["last_page"] = page_of(attachment, max(begin, end - 1))
    if end < len(text):
        result["next_start"] = end if page is None else None
        if page is None:
            result["more"] = f"{len(text) - end:,} more characters: read again with start={end}."
        elif page < pages:
            result["more"] = f"Page {page + 1} of {pages} follows."
    if attachment.facts.get("truncated"):
        result["note"] = "The file's text was cut at the size limit; the end is not available."
    if attachment.kind == Attachment.Kind.CSV:
        result["columns"] = attachment.facts.get("columns", [])
        result["rows"] = attachment.facts.get("rows", 0)
    if attachment.is_image:
        result["image"] = {k: attachment.facts[k] for k in ("width", "height", "format", "colour", "colour_name")}
    if attachment.facts.get("no_text"):
        result["note"] = "This PDF has no text layer (a scan?): there is nothing to read."
    result["link"] = link(attachment, page=result.get("page") or result.get("first_page"), start=begin, end=end)
    return {k: v for k, v in result.items() if v is not None}


def words_of(query: str) -> list[str]:
    words = [w.lower() for w in re.findall(r"\w[\w'-]*", query) if len(w) > 1]
    return list(dict.fromkeys(words))[:MAX_WORDS]


def search(files: QuerySet[Attachment], query: str, limit: int) -> list[dict[str, Any]]:
    words = words_of(query)
    if not words:
        raise ValueError("query: give one or more words to look for.")
    match = Q()
    for word in words:
        match |= Q(text__icontains=word)
    candidates = files.filter(match, status=Attachment.Status.READY).order_by("-id")[:MAX_SEARCH_FILES]
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)
    found: list[tuple[int, int, dict[str, Any]]] = []
    for attachment in candidates:
        text = attachment.text
        last_end = -1
        for hit in pattern.finditer(text):
            if hit.start() < last_end:
                continue  # inside the passage already taken
            begin = max(0, hit.start() - PASSAGE_RADIUS)
            end = min(len(text), hit.end() + PASSAGE_RADIUS)
            begin, end = _snap(text, begin, end)
            passage = text[begin:end]
            seen = {w for w in words if w in passage.lower()}
            last_end = end
            found.append(
                (
                    -len(seen),
                    len(found),
                    {
                        "file_id": attachment.pk,
                        "name": attachment.name,
                        "page": page_of(attachment, hit.start()) if attachment.page_count > 1 else None,
                        "start": begin,
                        "end": end,
                        "passage": " ".join(passage.split()),
                        "link": link(attachment, start=begin, end=end),
                    },
                )
            )
            if len(found) > 20 * limit:
                break
    found.sort(key=lambda item: (item[0], item[1]))
    return [{k: v for k, v in item.items() if v is not None} for _, _, item in found[:limit]]


def _snap(text: str, begin: int, end: int) -> tuple[int, int]:
    """Widens a window to whole words."""
    while begin > 0 and not text[begin - 1].isspace() and end - begin < 3 * PASSAGE_RADIUS:
        begin -= 1
    while end < len(text) and not text[end].isspace() and end - begin < 3 * PASSAGE_RADIUS:
        end += 1
    return begin, end
