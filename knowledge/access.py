"""Who may see which base: its owner, and members of the groups it is shared with. Membership is
read fresh on every call (core.groups), so an admin's change counts from the next search in
every process — the chat, a subagent, /v1 and /mcp all search through here."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from core import groups as member_groups

from .models import Document, KnowledgeBase


def visible(user_id: int | None) -> QuerySet[KnowledgeBase]:
    if user_id is None:
        return KnowledgeBase.objects.none()
    # A subquery, not a list read first: one query for the bases and the membership together.
    mine = member_groups.user_groups().filter(user_id=user_id).values("group_id")
    return KnowledgeBase.objects.filter(Q(owner_id=user_id) | Q(groups__in=mine)).distinct()


def any_visible(user: Any) -> Exists:
    """Whether the user (an id or an OuterRef to one) may see any base: an annotation, so a page
    that lists bases only when there are some asks in the query it makes anyway."""
    # The membership is a subquery one level deeper: an outer reference must reach one more out.
    member = OuterRef(user) if isinstance(user, OuterRef) else user
    mine = member_groups.user_groups().filter(user_id=member).values("group_id")
    return Exists(KnowledgeBase.objects.filter(Q(owner_id=user) | Q(groups__in=mine)))


def owned(user_id: int) -> QuerySet[KnowledgeBase]:
    """What a user may change: only their own bases (a shared base is read-only to others)."""
    return KnowledgeBase.objects.filter(owner_id=user_id)


def visible_documents(user_id: int | None) -> QuerySet[Document]:
    return Document.objects.filter(base__in=visible(user_id).values("pk"))
