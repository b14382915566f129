"""Attaching bases to a chat (the chat's tools popover): that chat's searches look in those
bases only. A user attaches only bases they may see; a link to a base they can no longer see
stays harmless, since every search checks visibility again (knowledge.retrieval)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from . import access
from .models import ChatBase


@dataclass(frozen=True)
class BaseChoice:
    id: int
    name: str
    attached: bool


def choices(user_id: int, chat_id: int) -> list[BaseChoice]:
    """The bases the user may attach, and whether each is: one query."""
    found = (
        access.visible(user_id)
        .annotate(attached=Exists(ChatBase.objects.filter(chat_id=chat_id, base_id=OuterRef("pk"))))
        .order_by("name", "id")
        .values_list("id", "name", "attached")[:100]
    )
    return [BaseChoice(base_id, name, attached) for base_id, name, attached in found]


def set_for_chat(user_id: int, chat_id: int, posted: list[str]) -> None:
    """The chat's attached bases become exactly the visible ones posted; anything else posted
    (another user's base id, not a number) is ignored."""
    wanted = {int(value) for value in posted if value.isdigit() and len(value) < 19}
    allowed = set(access.visible(user_id).filter(pk__in=wanted).values_list("pk", flat=True))
    ChatBase.objects.filter(chat_id=chat_id).exclude(base_id__in=allowed).delete()
    present = set(ChatBase.objects.filter(chat_id=chat_id).values_list("base_id", flat=True))
    ChatBase.objects.bulk_create([ChatBase(chat_id=chat_id, base_id=base_id) for base_id in allowed - present])
