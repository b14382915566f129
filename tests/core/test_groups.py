"""Group limits (core/groups.py): none chosen is everyone; otherwise membership of one of them."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from core import groups

pytestmark = pytest.mark.django_db


def test_nothing_chosen_is_everyone() -> None:
    assert groups.allows([], frozenset())
    assert groups.allows([], frozenset({3}))


def test_one_shared_group_is_enough() -> None:
    assert groups.allows([1, 2], frozenset({2, 9}))
    assert not groups.allows([1, 2], frozenset({9}))
    assert not groups.allows([1], frozenset())


def test_membership_is_read_fresh_each_time(user: Any) -> None:
    staff = Group.objects.create(name="staff")
    assert groups.of_user(user.pk) == frozenset()
    user.groups.add(staff)
    assert groups.of_user(user.pk) == frozenset({staff.pk})
    user.groups.remove(staff)
    assert groups.of_user(user.pk) == frozenset()
    assert groups.of_user(None) == frozenset()


def test_admin_label_names_the_groups_or_everyone() -> None:
    from chat.models import LLMModel

    model = LLMModel.objects.create(name="M", model="openai/m")
    assert groups.label(model) == "Everyone"
    model.groups.add(Group.objects.create(name="sales"), Group.objects.create(name="legal"))
    assert groups.label(model) == "legal, sales"
