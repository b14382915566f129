"""Who belongs to which Django auth groups, and whether a thing limited to groups is open to them.

Models, toolsets, MCP servers and agents can each be limited to groups in Django admin; none
chosen means everyone (the default, so a fresh install behaves as before). Membership is read
fresh on every call, never cached: a change an admin makes takes effect on the user's next
turn or page, in every process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import CharField, OuterRef, StringAgg, Subquery, Value
from django.db.models.functions import Cast

NOT_IN_GROUPS = "Not available to your groups"


def of_user(user_id: int | None) -> frozenset[int]:
    """The ids of the groups a user belongs to (one indexed query)."""
    if user_id is None:
        return frozenset()
    through = get_user_model().groups.through
    return frozenset(through.objects.filter(user_id=user_id).values_list("group_id", flat=True))


def ids_subquery(user: OuterRef) -> Subquery:
    """The groups of the user `user` points at, as one column of the caller's query ("3,7", or
    NULL without any): read with a row the page loads anyway instead of a query of its own.
    `parse` turns the column back into ids."""
    ids = user_groups().filter(user_id=user).values("user_id")
    return Subquery(ids.annotate(ids=StringAgg(Cast("group_id", CharField()), Value(","))).values("ids"))


def parse(column: str | None) -> frozenset[int]:
    return frozenset(int(part) for part in (column or "").split(",") if part)


def allows(limited_to: Iterable[int], mine: frozenset[int]) -> bool:
    """No groups chosen: everyone. Otherwise a member of at least one of them."""
    required = frozenset(limited_to)
    return not required or bool(required & mine)


def label(row: object) -> str:
    """For admin lists: the groups a row (with a `groups` field) is limited to, or "Everyone"."""
    names = [group.name for group in row.groups.all()]  # type: ignore[attr-defined]
    return ", ".join(sorted(names)) or "Everyone"


def user_groups() -> Any:
    """The user–group table, for subqueries."""
    return get_user_model().groups.through.objects
