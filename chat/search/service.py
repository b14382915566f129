"""A user's search: the matching chats, newest first, each with its highlighted title and a
highlighted snippet of its latest matching message."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils.safestring import SafeString

from chat.models import Chat, Message

from . import backends
from .query import highlight, snippet

LIMIT = 20


@dataclass(frozen=True)
class Result:
    chat_id: int
    title: SafeString
    snippet: SafeString | None
    role: str
    updated_at: datetime


def find(user_id: int, words: list[str], limit: int = LIMIT) -> list[Result]:
    """Four queries whatever the number of results: ids from the index, then the chats, then
    the messages shown."""
    titles, messages = backends.matching(user_id, words)
    ids = titles | set(messages)
    if not ids:
        return []
    chats = list(
        Chat.objects.filter(owner_id=user_id, pk__in=ids, listed=True)
        .order_by("-updated_at", "-id")
        .only("id", "title", "updated_at")[:limit]
    )
    shown = [messages[c.pk] for c in chats if c.pk in messages]
    texts = {m.pk: m for m in Message.objects.filter(pk__in=shown).only("id", "role", "content")}
    results = []
    for chat in chats:
        message = texts.get(messages.get(chat.pk, 0))
        results.append(
            Result(
                chat_id=chat.pk,
                title=highlight(chat.display_title, words),
                snippet=snippet(message.content, words) if message else None,
                role=message.role if message else "",
                updated_at=chat.updated_at,
            )
        )
    return results
