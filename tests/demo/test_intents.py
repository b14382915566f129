"""What the demo model reads in a message (demo/intents.py): which tool, with which
arguments."""

from __future__ import annotations

from typing import Any

import pytest

from demo.intents import detect_intents


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("time in London", [("current_time", {"timezone": "Europe/London"})]),
        ("current time", [("current_time", {"timezone": "UTC"})]),
        (
            "What's the time in Tokyo and New York?",
            [
                ("current_time", {"timezone": "Asia/Tokyo"}),
                ("current_time", {"timezone": "America/New_York"}),
            ],
        ),
        ("what is (3+4)/2", [("calculate", {"expression": "(3+4)/2"})]),
        ("2^10", [("calculate", {"expression": "2^10"})]),
        ("12 times 7", [("calculate", {"expression": "12*7"})]),
        ("what is 15 plus 27", [("calculate", {"expression": "15+27"})]),
        (
            "look up the Rust borrow checker",
            [("search", {"query": "Rust borrow checker", "num_results": 5})],
        ),
        (
            "search the web for sourdough recipes",
            [("search", {"query": "sourdough recipes", "num_results": 5})],
        ),
        ("use the picture tool, then use the sound tool", [("picture", {}), ("sound", {})]),
        ("The meeting is on 2026-11-22", []),
        ("tell me a joke", []),
    ],
)
def test_intent_table(text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    assert [(i.tool, i.arguments) for i in detect_intents(text)] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Summarize stale tasks across projects", [("list_tasks", {"stale_days": 7})]),
        ("Which tasks haven't been updated in two weeks?", [("list_tasks", {"stale_days": 14})]),
        ("What's on my calendar this week?", [("list_events", {})]),
        ("Am I free tomorrow?", [("list_events", {"start_date": "tomorrow", "end_date": "tomorrow"})]),
        ("What meetings do I have today?", [("list_events", {"start_date": "today", "end_date": "today"})]),
        ("Any unread emails?", [("list_emails", {"unread_only": True})]),
        ("Check my inbox", [("list_emails", {})]),
        ("Summarize yesterday's meeting", [("list_meetings", {"date": "yesterday"})]),
        ("What were the action items from the last meeting?", [("list_meetings", {})]),
        ("Show task 12", [("get_task", {"task_id": 12})]),
        ("Details of task #7", [("get_task", {"task_id": 7})]),
        ("Show meeting 2", [("get_meeting", {"meeting_id": 2})]),
        ("My tasks", [("list_tasks", {"status": ["TODO", "IN_PROGRESS", "BLOCKED"]})]),
        ("Tasks assigned to Marco Rossi", [("list_tasks", {"assignee": "Marco Rossi"})]),
        ("What's overdue?", [("list_tasks", {"overdue": True})]),
        (
            "Blocked tasks in the Website relaunch project",
            [("list_tasks", {"project": "Website relaunch", "status": ["BLOCKED"]})],
        ),
        ("Tasks in progress", [("list_tasks", {"status": ["IN_PROGRESS"]})]),
        (
            'Create a task "Fix login bug" in Website relaunch, due 2026-03-01, high priority, assigned to Sam',
            [
                (
                    "create_task",
                    {
                        "project": "Website relaunch",
                        "name": "Fix login bug",
                        "due_date": "2026-03-01",
                        "priority": "HIGH",
                        "assignee": "Sam",
                    },
                )
            ],
        ),
        (
            "Add a task to fix the onboarding copy in Mobile app 2.0",
            [("create_task", {"project": "Mobile app 2.0", "name": "Fix the onboarding copy"})],
        ),
        ("Create a task", [("list_projects", {})]),
        ("Mark task 12 as done", [("update_task", {"task_id": 12, "status": "DONE"})]),
        ("Make task 5 urgent", [("update_task", {"task_id": 5, "priority": "URGENT"})]),
        # Questions about what happened must not change anything.
        ("Did Sam finish task 3?", [("get_task", {"task_id": 3})]),
        ("Did Marco create a task for the redirects?", []),
        ("Write a blog post about our launch", []),
        ("Show my projects", [("list_projects", {})]),
        (
            "Check my email and what's on my calendar this week",
            [("list_emails", {}), ("list_events", {})],
        ),
        ("Search for the best to-do apps", [("search", {"query": "best to-do apps", "num_results": 5})]),
    ],
)
def test_workspace_intent_table(text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    assert [(i.tool, i.arguments) for i in detect_intents(text)] == expected


@pytest.mark.parametrize("platform", ["x", "bluesky", "mastodon"])
def test_posts_fit_the_platform(platform: str) -> None:
    names = {"x": "an X", "bluesky": "a Bluesky", "mastodon": "a Mastodon"}
    [intent] = detect_intents(f"Write {names[platform]} post about the launch of Acme Cloud")
    assert intent.arguments["platform"] == platform
    assert "Acme Cloud" in intent.arguments["text"]
    assert len(intent.arguments["text"]) <= {"x": 280, "bluesky": 300, "mastodon": 500}[platform]
