"""A turn's facts about its owner in one query (chat/worker/owner_facts.py): their groups, the
model's groups, whether a budget applies, whether memory is on and holds anything, and whether
they may see a knowledge base — the same answers as the queries they replace."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Budget, LLMModel
from chat.spend import budgets
from chat.worker import owner_facts
from core import groups as member_groups
from knowledge import access
from knowledge.models import KnowledgeBase
from memory import store as memory_store
from memory.models import Memory

pytestmark = pytest.mark.django_db


def test_one_query_gives_the_owners_groups_the_models_groups_and_no_budget(
    user: Any, other_user: Any, demo_model: LLMModel
) -> None:
    staff, sales, legal = (Group.objects.create(name=name) for name in ("staff", "sales", "legal"))
    user.groups.add(staff, sales)
    other_user.groups.add(legal)
    demo_model.groups.add(sales, legal)
    # Budgets of someone else and of a group the owner is not in do not apply.
    Budget.objects.create(user=other_user, period="day", max_tokens=10)
    Budget.objects.create(group=legal, period="day", max_tokens=10)

    with CaptureQueriesContext(connection) as queries:
        facts = owner_facts.read(user.pk, demo_model.pk)

    assert len(queries) == 1
    assert facts.groups == member_groups.of_user(user.pk) == {staff.pk, sales.pk}
    assert facts.model_groups == {sales.pk, legal.pk}
    assert facts.budgeted is False
    assert demo_model.open_to(user.pk, facts.groups, limited_to=facts.model_groups)
    assert not demo_model.open_to(other_user.pk, frozenset(), limited_to=facts.model_groups)


@pytest.mark.parametrize("whose", ["own", "group", "both"])
def test_a_budget_of_the_owner_or_of_one_of_their_groups_applies(user: Any, demo_model: LLMModel, whose: str) -> None:
    staff = Group.objects.create(name="staff")
    user.groups.add(staff)
    if whose in ("own", "both"):
        Budget.objects.create(user=user, period="day", max_tokens=10)
    if whose in ("group", "both"):
        Budget.objects.create(group=staff, period="month", max_tokens=10)

    facts = owner_facts.read(user.pk, demo_model.pk)

    assert facts.budgeted is True
    assert facts.groups == {staff.pk}
    assert facts.model_groups == frozenset()  # limited to no group: everyone
    assert len(budgets._rules(user.pk, facts.groups)) == (2 if whose == "both" else 1)


def test_an_owner_in_no_group_with_no_budget(user: Any, demo_model: LLMModel) -> None:
    assert owner_facts.read(user.pk, demo_model.pk) == owner_facts.OwnerFacts(frozenset(), frozenset(), False)


def test_memory_on_by_default_and_remembering_only_with_memories(user: Any, other_user: Any, demo_model: Any) -> None:
    Memory.objects.create(owner=other_user, text="Someone else's")
    facts = owner_facts.read(user.pk, demo_model.pk)
    assert facts.memory_on is memory_store.is_enabled(user.pk) is True
    assert facts.remembers is False  # nothing of the owner's to offer: the prompt reads nothing

    Memory.objects.create(owner=user, text="Prefers metric units")
    assert owner_facts.read(user.pk, demo_model.pk).remembers is True

    memory_store.set_enabled(user.pk, False)
    facts = owner_facts.read(user.pk, demo_model.pk)
    assert facts.memory_on is memory_store.is_enabled(user.pk) is False
    assert facts.remembers is False and facts.offered()["memory"] is False

    memory_store.set_enabled(user.pk, True)  # a preference row saying "on"
    facts = owner_facts.read(user.pk, demo_model.pk)
    assert facts.memory_on is True and facts.remembers is True


def test_a_base_is_seen_when_owned_or_shared_with_one_of_the_owners_groups(
    user: Any, other_user: Any, demo_model: Any
) -> None:
    def sees(who: Any) -> bool:
        seen = owner_facts.read(who.pk, demo_model.pk).sees_bases
        assert seen is access.visible(who.pk).exists()  # the rule knowledge/access.py keeps
        assert owner_facts.read(who.pk, demo_model.pk).offered()["knowledge"] is seen
        return seen

    readers, others = Group.objects.create(name="readers"), Group.objects.create(name="others")
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    assert sees(user) and not sees(other_user)
    base.groups.add(others)
    other_user.groups.add(readers)
    assert not sees(other_user)  # shared, but not with their group
    base.groups.add(readers)
    assert sees(other_user)
    base.delete()
    assert not sees(user) and not sees(other_user)
