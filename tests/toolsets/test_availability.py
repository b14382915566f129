"""The availability matrix: every combination of admin, user and key state → one reason."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.contrib.auth.models import Group

from core.groups import NOT_IN_GROUPS
from toolsets import availability
from toolsets.availability import DISABLED_BY_ADMIN, DISABLED_BY_USER, NEEDS_SETUP, NO_API_KEY
from toolsets.base import Toolset, tool
from toolsets.models import ToolsetConfig, UserToolsetConfig

pytestmark = pytest.mark.django_db


@tool()
def noop() -> str:
    """Do nothing."""
    return "ok"


SETUP_DONE: set[int] = set()


def make_toolsets() -> dict[str, Toolset]:
    return {
        "keyed": Toolset(id="keyed", name="Keyed", description="", tools=[noop], needs_api_key=True),
        "free": Toolset(id="free", name="Free", description="", tools=[noop]),
        "setup": Toolset(
            id="setup", name="Setup", description="", tools=[noop], needs_setup=lambda uid: uid not in SETUP_DONE
        ),
        "optin": Toolset(id="optin", name="Opt-in", description="", tools=[noop], enabled_by_default=False),
    }


@pytest.fixture(autouse=True)
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, Toolset]:
    toolsets = make_toolsets()
    monkeypatch.setattr(availability, "all_toolsets", lambda: toolsets)
    SETUP_DONE.clear()
    return toolsets


def expected(admin_on: bool | None, user_on: bool | None, user_key: bool, app_key: bool) -> str:
    if admin_on is False:
        return DISABLED_BY_ADMIN
    if user_on is False:
        return DISABLED_BY_USER
    if not (user_key or app_key):
        return NO_API_KEY
    return ""


@pytest.mark.parametrize(
    ("admin_on", "user_on", "user_key", "app_key"),
    list(itertools.product([None, True, False], [None, True, False], [False, True], [False, True])),
)
def test_keyed_toolset_matrix(
    user: Any, admin_on: bool | None, user_on: bool | None, user_key: bool, app_key: bool
) -> None:
    if admin_on is not None or app_key:
        ToolsetConfig.objects.create(
            toolset_id="keyed",
            enabled=admin_on if admin_on is not None else True,
            api_key="app-key-123456" if app_key else "",
        )
    if user_on is not None or user_key:
        UserToolsetConfig.objects.create(
            user=user,
            toolset_id="keyed",
            enabled=user_on if user_on is not None else True,
            api_key="user-key-abcdef" if user_key else "",
        )
    state = availability.for_user(user.pk)["keyed"]
    assert state.reason == expected(admin_on, user_on, user_key, app_key)
    assert state.usable == (state.reason == "")
    if state.usable:
        assert state.api_key == ("user-key-abcdef" if user_key else "app-key-123456")  # the user's key wins


def test_keyless_toolset_is_usable_by_default(user: Any) -> None:
    assert availability.for_user(user.pk)["free"].usable


def test_setup_needed_until_done(user: Any) -> None:
    assert availability.for_user(user.pk)["setup"].reason == NEEDS_SETUP
    SETUP_DONE.add(user.pk)
    assert availability.for_user(user.pk)["setup"].usable


def test_opt_in_toolset_needs_configuring_then_user_switch_decides(user: Any) -> None:
    assert availability.for_user(user.pk)["optin"].reason == NEEDS_SETUP
    config = UserToolsetConfig.objects.create(user=user, toolset_id="optin", enabled=True)
    assert availability.for_user(user.pk)["optin"].usable
    config.enabled = False
    config.save()
    assert availability.for_user(user.pk)["optin"].reason == DISABLED_BY_USER


def test_admin_switch_wins_over_everything(user: Any) -> None:
    ToolsetConfig.objects.create(toolset_id="setup", enabled=False)
    assert availability.for_user(user.pk)["setup"].reason == DISABLED_BY_ADMIN


def test_one_users_key_is_not_anothers(user: Any, other_user: Any) -> None:
    UserToolsetConfig.objects.create(user=user, toolset_id="keyed", api_key="user-key-abcdef")
    assert availability.for_user(user.pk)["keyed"].usable
    assert availability.for_user(other_user.pk)["keyed"].reason == NO_API_KEY


def test_for_user_uses_a_fixed_number_of_queries(user: Any, django_assert_max_num_queries: Any) -> None:
    # The admin's configurations, their groups, the user's own settings, the user's groups.
    for toolset_id in ("free", "keyed", "optin"):
        ToolsetConfig.objects.create(toolset_id=toolset_id).groups.add(Group.objects.create(name=toolset_id))
    with django_assert_max_num_queries(4):
        availability.for_user(user.pk)


def test_api_keys_are_encrypted_at_rest(user: Any) -> None:
    from django.db import connection

    UserToolsetConfig.objects.create(user=user, toolset_id="keyed", api_key="sk-very-secret-1a2b")
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM toolsets_usertoolsetconfig")
        (raw,) = cursor.fetchone()
    assert raw.startswith("fernet:") and "very-secret" not in raw
    assert availability.for_user(user.pk)["keyed"].user_key_mask == "••••1a2b"


def test_a_toolset_limited_to_groups_is_not_available_to_others(user: Any) -> None:
    staff = Group.objects.create(name="staff")
    config = ToolsetConfig.objects.create(toolset_id="free")
    config.groups.add(staff)

    state = availability.for_user(user.pk)["free"]
    assert (state.usable, state.reason, state.fixable_by_user) == (False, NOT_IN_GROUPS, False)
    assert availability.for_toolset(user.pk, "free").reason == NOT_IN_GROUPS  # type: ignore[union-attr]

    # Membership counts from the next look, with nothing cached in between.
    user.groups.add(staff)
    assert availability.for_user(user.pk)["free"].usable
    user.groups.remove(staff)
    assert availability.for_toolset(user.pk, "free").reason == NOT_IN_GROUPS  # type: ignore[union-attr]


def test_switched_off_by_the_admin_comes_before_groups(user: Any) -> None:
    config = ToolsetConfig.objects.create(toolset_id="free", enabled=False)
    config.groups.add(Group.objects.create(name="staff"))
    assert availability.for_user(user.pk)["free"].reason == DISABLED_BY_ADMIN


def test_a_toolsets_own_groups_apply_too(user: Any, fake_registry: dict[str, Toolset]) -> None:
    """An MCP server's groups travel on its toolset: the user must be in one of them as well as in
    one of its configuration's (when that names any)."""
    staff, sales = Group.objects.create(name="staff"), Group.objects.create(name="sales")
    fake_registry["server"] = Toolset(
        id="server", name="S", description="", tools=[noop], group_ids=frozenset({staff.pk})
    )
    assert availability.for_user(user.pk)["server"].reason == NOT_IN_GROUPS
    user.groups.add(staff)
    assert availability.for_user(user.pk)["server"].usable
    ToolsetConfig.objects.create(toolset_id="server").groups.add(sales)
    assert availability.for_user(user.pk)["server"].reason == NOT_IN_GROUPS
    user.groups.add(sales)
    assert availability.for_user(user.pk)["server"].usable
