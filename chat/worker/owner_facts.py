"""What a turn needs to know about its owner before it starts, in one query: their groups, the
groups the turn's model is limited to, whether any budget applies to them, whether memory is on
and holds anything, and whether they may see any knowledge base. A turn reads a budget's rules,
its owner's memories or offers the Memory and Knowledge tools only when these say so.

Plain SQL on purpose. Each of the three as an ORM query cost the worker more to build than to
run (about 0.4 ms of CPU each, against ~0.1 ms for this one statement; bench/RESULTS.md), and as
subqueries of the claim's query more still. Tables and columns are read from the models, so a
custom user model or a renamed table is followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from django.contrib.auth import get_user_model
from django.db import connection

from chat.models import Budget, LLMModel
from core.sql import column, table
from knowledge.models import KnowledgeBase
from memory.models import Memory, MemoryPreference


@dataclass(frozen=True)
class OwnerFacts:
    groups: frozenset[int]  # the owner's groups
    model_groups: frozenset[int]  # the groups the model is limited to (none: everyone)
    budgeted: bool  # a budget of the owner's own or of one of their groups applies
    memory_on: bool = True  # the owner did not turn memory off (memory.store.is_enabled)
    remembers: bool = False  # memory is on and the owner has memories to offer
    sees_bases: bool = False  # the owner may search a knowledge base (knowledge.access.visible)

    def offered(self) -> dict[str, bool]:
        """The toolsets' "offered to this user" answers these facts hold (Toolset.offered_to)."""
        return {"memory": self.memory_on, "knowledge": self.sees_bases}


@cache
def _statement() -> str:
    members = get_user_model().groups.through
    limits = LLMModel.groups.through
    shares = KnowledgeBase.groups.through
    member, member_group = column(members, get_user_model()._meta.model_name or "user"), column(members, "group")
    mine = f"SELECT {member_group} FROM {table(members)} WHERE {member} = %s"
    # One row per fact, tagged: 'u' a group of the owner, 'm' a group the model is limited to,
    # 'b' a budget that applies, 'o' memory turned off, 'r' a memory, 'k' a base the owner may
    # see: its own, or one shared with one of their groups (at most one row of each is needed).
    return (
        f"SELECT 'u', {member_group} FROM {table(members)} WHERE {member} = %s"
        f" UNION ALL SELECT 'm', {column(limits, 'group')} FROM {table(limits)}"
        f" WHERE {column(limits, 'llmmodel')} = %s"
        f" UNION ALL SELECT * FROM (SELECT 'b', {column(Budget, 'id')} FROM {table(Budget)}"
        f" WHERE {column(Budget, 'user')} = %s OR {column(Budget, 'group')} IN ({mine}) LIMIT 1) budgeted"
        f" UNION ALL SELECT 'o', {column(MemoryPreference, 'user')} FROM {table(MemoryPreference)}"
        f" WHERE {column(MemoryPreference, 'user')} = %s AND {column(MemoryPreference, 'enabled')} = %s"
        f" UNION ALL SELECT * FROM (SELECT 'r', {column(Memory, 'id')} FROM {table(Memory)}"
        f" WHERE {column(Memory, 'owner')} = %s LIMIT 1) remembered"
        f" UNION ALL SELECT * FROM (SELECT 'k', {column(KnowledgeBase, 'id')} FROM {table(KnowledgeBase)}"
        f" WHERE {column(KnowledgeBase, 'owner')} = %s OR {column(KnowledgeBase, 'id')} IN"
        f" (SELECT {column(shares, 'knowledgebase')} FROM {table(shares)} WHERE {column(shares, 'group')} IN ({mine}))"
        " LIMIT 1) sees"
    )


def read(owner_id: int, model_id: int) -> OwnerFacts:
    """The facts for the owner and the model (blocking)."""
    params = [owner_id, model_id, owner_id, owner_id, owner_id, False, owner_id, owner_id, owner_id]
    with connection.cursor() as cursor:
        cursor.execute(_statement(), params)
        rows = cursor.fetchall()
    kinds = {kind for kind, _ in rows}
    return OwnerFacts(
        groups=frozenset(value for kind, value in rows if kind == "u"),
        model_groups=frozenset(value for kind, value in rows if kind == "m"),
        budgeted="b" in kinds,
        memory_on="o" not in kinds,
        remembers="o" not in kinds and "r" in kinds,
        sees_bases="k" in kinds,
    )
