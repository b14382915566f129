"""A chat's branches: the versions of an exchange (an edited question, a regenerated answer) and
which of them the chat shows.

Turns form a tree by `Turn.parent`; turns with the same parent are versions of one exchange.
`Turn.chosen` is the version picked among its siblings (kept while another branch is shown, so
coming back finds the same answers below), and `Turn.active` flags the turns of the branch shown
now: the page and the transcript load it with one indexed filter instead of walking the tree.
Every change goes through `choose`, which recomputes the flags in a fixed number of queries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Exists, OuterRef, Q, QuerySet, When

from .models import Chat, Turn


def last_turn(chat: Chat) -> Turn | None:
    """The end of the branch the chat shows."""
    return chat.turns.filter(active=True).order_by("-id").first()


def _path(rows: Sequence[tuple[int, int | None, bool]]) -> list[int]:
    """The shown branch of a tree given as (id, parent id, chosen) rows: from the first
    exchange down, at each level the chosen version (the newest, should none or several be)."""
    children: dict[int | None, list[tuple[int, bool]]] = defaultdict(list)
    for pk, parent_id, chosen in rows:
        children[parent_id].append((pk, chosen))
    path: list[int] = []
    at: int | None = None
    while children.get(at):
        versions = children[at]
        picked = [pk for pk, chosen in versions if chosen] or [pk for pk, _ in versions]
        at = max(picked)
        path.append(at)
    return path


def choose(turn: Turn) -> list[int]:
    """Makes `turn` the shown version of its exchange, and the chat show the branch through it
    (below it, the versions chosen there before). Returns the shown branch's turn ids. Call in a
    transaction holding the chat's row lock."""
    siblings = Turn.objects.filter(chat_id=turn.chat_id, parent_id=turn.parent_id)
    siblings.exclude(pk=turn.pk).update(chosen=False)
    Turn.objects.filter(pk=turn.pk).update(chosen=True)
    rows = list(Turn.objects.filter(chat_id=turn.chat_id).values_list("id", "parent_id", "chosen"))
    path = _path(rows)
    Turn.objects.filter(chat_id=turn.chat_id, active=True).exclude(pk__in=path).update(active=False)
    Turn.objects.filter(pk__in=path, active=False).update(active=True)
    return path


def ancestry(turn_id: int, chat_id: int) -> list[int]:
    """The turn and every turn before it on its branch, oldest first: what its transcript is
    made of, whichever branch the chat shows meanwhile."""
    parents = dict(Turn.objects.filter(chat_id=chat_id).values_list("id", "parent_id"))
    chain: list[int] = []
    current: int | None = turn_id
    while current is not None and current not in chain:
        chain.append(current)
        current = parents.get(current)
    return chain[::-1]


@dataclass(frozen=True)
class Versions:
    """Where a turn stands among the versions of its exchange."""

    number: int  # 1-based
    count: int
    previous: int | None  # the turn id of the version before, if any
    next: int | None
    edited: bool  # the versions' questions differ (the switcher belongs on the question)


def with_versions(turns: QuerySet[Turn]) -> QuerySet[Turn]:
    """The turns, each knowing whether its exchange has other versions (in the same query), so
    a chat without any costs `versions` no query at all."""
    others = Turn.objects.filter(chat_id=OuterRef("chat_id")).exclude(pk=OuterRef("pk"))
    return turns.annotate(
        has_versions=Case(
            When(parent__isnull=True, then=Exists(others.filter(parent__isnull=True))),
            default=Exists(others.filter(parent_id=OuterRef("parent_id"))),
        )
    )


def versions(turns: list[Turn]) -> dict[int, Versions]:
    """Each turn's place among its siblings, for many turns in at most two queries (none when
    the turns come from `with_versions` and no exchange has another version)."""
    turns = [t for t in turns if getattr(t, "has_versions", True)]
    if not turns:
        return {}
    from .models import Message

    chat_id = turns[0].chat_id
    parents = {t.parent_id for t in turns}
    where = Q(parent_id__in=[p for p in parents if p is not None])
    if None in parents:
        where |= Q(parent__isnull=True)
    groups: dict[int | None, list[int]] = defaultdict(list)
    for pk, parent in Turn.objects.filter(where, chat_id=chat_id).order_by("id").values_list("id", "parent_id"):
        groups[parent].append(pk)
    several = [pk for group in groups.values() if len(group) > 1 for pk in group]
    questions: dict[int, str] = {}
    if several:
        rows = Message.objects.filter(turn_id__in=several, role=Message.Role.USER, lane="").order_by("id")
        for turn_id, content in rows.values_list("turn_id", "content"):
            questions.setdefault(turn_id, content)  # type: ignore[arg-type]
    out: dict[int, Versions] = {}
    for t in turns:
        group = groups.get(t.parent_id, [t.pk])
        if t.pk not in group:
            group = [*group, t.pk]
        index = group.index(t.pk)
        edited = len({questions.get(pk, "") for pk in group}) > 1
        out[t.pk] = Versions(
            number=index + 1,
            count=len(group),
            previous=group[index - 1] if index > 0 else None,
            next=group[index + 1] if index + 1 < len(group) else None,
            edited=edited,
        )
    return out


def as_view(found: Versions | None) -> dict[str, Any] | None:
    if found is None or found.count < 2:
        return None
    return {
        "number": found.number,
        "count": found.count,
        "previous": found.previous,
        "next": found.next,
        "edited": found.edited,
    }
