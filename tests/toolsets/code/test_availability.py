"""The Code toolset is off until an admin switches it on, then on for everyone or for the groups
the admin picked."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from core.groups import NOT_IN_GROUPS
from toolsets import availability
from toolsets.models import ToolsetConfig

pytestmark = pytest.mark.django_db


def test_off_until_an_admin_enables_it_then_per_group(user: Any, other_user: Any) -> None:
    state = availability.for_user(user.pk)["code"]
    assert not state.usable and state.reason == availability.DISABLED_BY_ADMIN
    assert availability.for_user(user.pk)["files"].usable  # others are on until switched off

    config = ToolsetConfig.objects.create(toolset_id="code", enabled=True)
    assert availability.for_user(user.pk)["code"].usable

    analysts = Group.objects.create(name="analysts")
    config.groups.add(analysts)
    user.groups.add(analysts)
    assert availability.for_user(user.pk)["code"].usable
    assert availability.for_user(other_user.pk)["code"].reason == NOT_IN_GROUPS
