"""The demo model reads the user's name from the system prompt (chat/worker/prompts.py), so "my tasks"
lists the tasks assigned to them, as the Workspace sample data assigns them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from chat.worker.prompts import system_prompt
from demo.planner import user_name

from .helpers import WORKSPACE_TOOLS, stream, user


def system(name: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system_prompt(datetime(2026, 3, 2, tzinfo=UTC), name)}]


def test_the_prompt_carries_the_name_the_demo_reads_back() -> None:
    assert user_name(system("Ada Lovelace")) == "Ada Lovelace"
    assert user_name(system("  Dr.\nAda  L. ")) == "Dr. Ada L."
    assert user_name(system("")) == ""
    assert "name is" not in system("")[0]["content"]


def test_my_tasks_are_the_ones_assigned_to_the_user() -> None:
    calls = stream(system("Ada Lovelace") + user("What's on my plate?"), tools=WORKSPACE_TOOLS).tool_calls()
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("toolset__workspace__list_tasks", {"status": ["TODO", "IN_PROGRESS", "BLOCKED"], "assignee": "Ada Lovelace"})
    ]


def test_without_a_name_or_for_someone_else_the_filter_is_unchanged() -> None:
    calls = stream(user("Show my tasks"), tools=WORKSPACE_TOOLS).tool_calls()
    assert "assignee" not in calls[0]["arguments"]
    calls = stream(system("Ada") + user("Show tasks assigned to Marco"), tools=WORKSPACE_TOOLS).tool_calls()
    assert calls[0]["arguments"]["assignee"] == "Marco"
    calls = stream(system("Ada") + user("Show all tasks"), tools=WORKSPACE_TOOLS).tool_calls()
    assert "assignee" not in calls[0]["arguments"]
