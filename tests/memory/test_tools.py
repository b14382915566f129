"""The Memory toolset: the caller's own memories only, refusals as clear tool errors, offered
only while memory is on, and an admin's "ask" policy holds."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from memory import store
from memory.models import Memory
from memory.tools import forget_memory, list_memories, save_memory, toolset, update_memory
from toolsets.base import ToolContext, ToolFailure
from toolsets.executor import execute
from toolsets.models import ToolRule, ToolsetConfig
from toolsets.registry import get_toolset


def _ctx(user: Any) -> ToolContext:
    return ToolContext(user_id=user.pk)


@pytest.mark.django_db
def test_save_update_list_forget_for_the_caller_only(user: Any, other_user: Any) -> None:
    assert get_toolset("memory") is toolset
    saved = save_memory.func(_ctx(user), "Prefers answers in German")
    assert saved["saved"] and save_memory.summarize(saved) == "Remembered: Prefers answers in German"  # type: ignore[misc]

    with pytest.raises(ToolFailure, match="No memory"):
        update_memory.func(_ctx(other_user), saved["id"], "Prefers French")
    with pytest.raises(ToolFailure, match="No memory"):
        forget_memory.func(_ctx(other_user), saved["id"])
    assert list_memories.func(_ctx(other_user))["count"] == 0

    update_memory.func(_ctx(user), saved["id"], "Prefers answers in French")
    assert [m["text"] for m in list_memories.func(_ctx(user), "french")["memories"]] == ["Prefers answers in French"]
    assert list_memories.func(_ctx(user), "bicycle")["count"] == 0
    forget_memory.func(_ctx(user), saved["id"])
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_refusals_are_tool_errors_and_need_a_user(user: Any) -> None:
    with pytest.raises(ToolFailure, match="empty"):
        save_memory.func(_ctx(user), "  ")
    with pytest.raises(ToolFailure, match="signed-in"):
        save_memory.func(ToolContext(), "x")
    store.set_enabled(user.pk, False)
    with pytest.raises(ToolFailure, match="turned off"):
        save_memory.func(_ctx(user), "Lives in Berlin")
    with pytest.raises(ToolFailure, match="turned off"):
        list_memories.func(_ctx(user))


@pytest.mark.django_db
def test_offered_only_while_memory_is_on(user: Any) -> None:
    assert toolset.offered_to is not None and toolset.offered_to(user.pk)
    store.set_enabled(user.pk, False)
    assert not toolset.offered_to(user.pk)


def test_saving_changes_things_so_policies_can_hold_it() -> None:
    for changing in (save_memory, update_memory, forget_memory):
        assert changing.side_effects and changing.declared_policy == "auto"
    assert not list_memories.side_effects


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["tool", "toolset"])
def test_an_admins_ask_policy_holds_saving_until_approved(user: Any, where: str) -> None:
    if where == "tool":
        ToolRule.objects.create(toolset_id="memory", tool="save_memory", policy="ask")
    else:
        ToolsetConfig.objects.create(toolset_id="memory", policy="ask")

    done = async_to_sync(execute)(
        "toolset__memory__save_memory", {"text": "Lives in Berlin"}, user_id=user.pk, tool_call_id="c1"
    )

    assert done.error is not None and done.error.type == "permission_denied"
    assert not Memory.objects.exists()
    approved = async_to_sync(execute)(
        "toolset__memory__save_memory",
        {"text": "Lives in Berlin"},
        user_id=user.pk,
        tool_call_id="c2",
        pre_approved=True,
    )
    assert approved.error is None and Memory.objects.get().text == "Lives in Berlin"
