"""A tool's policy: its declaration, then the admin (tool, else toolset), then the user — who may
only make it stricter."""

from __future__ import annotations

from typing import Any

import pytest

from toolsets import policy
from toolsets.base import Tool, Toolset, tool
from toolsets.exa import toolset as exa
from toolsets.models import ToolRule, ToolsetConfig, UserToolPolicy
from toolsets.workspace.tools import toolset as workspace


@tool()
def read() -> str:
    """Read something."""
    return "x"


@tool(side_effects=True)
def write() -> str:
    """Write something."""
    return "x"


def test_declared_defaults_follow_side_effects() -> None:
    assert read.declared_policy == "auto"
    assert write.declared_policy == "ask"
    assert tool(side_effects=True, policy="auto")(lambda: None).declared_policy == "auto"


def test_bad_declarations_fail_at_import() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        tool(policy="maybe")(lambda: None)
    with pytest.raises(ValueError, match="side effects cannot declare a cache time"):
        tool(side_effects=True, cache_ttl_s=60)(lambda: None)


def test_built_in_declarations() -> None:
    ws = {t.name: t for t in workspace.tools}
    assert {n for n, t in ws.items() if t.declared_policy == "ask"} == {
        "create_task",
        "update_task",
        "draft_social_post",
    }
    assert all(t.cache_ttl_s == 0 for t in ws.values())
    assert exa.get("search") is not None and exa.get("search").cache_ttl_s == 600  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("toolset_policy", "tool_policy", "user_policy", "expected"),
    [
        ("", "", "", "ask"),  # the declaration
        ("auto", "", "", "auto"),  # an admin may loosen, for the whole toolset…
        ("auto", "deny", "", "deny"),  # …and a tool's own rule wins over the toolset's
        ("", "auto", "ask", "ask"),  # a user may tighten
        ("", "auto", "deny", "deny"),
        ("deny", "", "ask", "deny"),  # but never loosen
        ("", "", "auto", "ask"),
    ],
)
def test_resolution_order(toolset_policy: str, tool_policy: str, user_policy: str, expected: str) -> None:
    found = policy.resolve(write, toolset_policy=toolset_policy, tool_policy=tool_policy, user_policy=user_policy)
    assert found.policy == expected


def test_user_choices_never_go_below_the_admin() -> None:
    assert policy.resolve(read).user_choices == ["auto", "ask", "deny"]
    assert policy.resolve(write).user_choices == ["ask", "deny"]
    assert policy.resolve(read, toolset_policy="deny").user_choices == ["deny"]


@pytest.mark.django_db
def test_policy_book_reads_every_level(user: Any, other_user: Any) -> None:
    toolset = Toolset(id="probe", name="Probe", description="", tools=[read, write])
    ToolsetConfig.objects.create(toolset_id="probe", policy="ask")
    ToolRule.objects.create(toolset_id="probe", tool="write", policy="auto", cache_enabled=False)
    UserToolPolicy.objects.create(user=user, toolset_id="probe", tool="write", policy="deny")

    mine, theirs = policy.PolicyBook(user.pk), policy.PolicyBook(other_user.pk)
    assert mine.get(toolset, read).policy == "ask"  # the toolset's admin policy
    assert mine.get(toolset, write).policy == "deny"  # the user's own, stricter
    assert theirs.get(toolset, write).policy == "auto"  # the tool's admin rule
    assert not theirs.get(toolset, write).cache_enabled
    # The one-tool lookup agrees with the book.
    for who in (user, other_user):
        for t in (read, write):
            assert policy.for_tool(who.pk, toolset, t) == policy.PolicyBook(who.pk).get(toolset, t)


def test_tools_are_tools() -> None:
    assert isinstance(read, Tool)
