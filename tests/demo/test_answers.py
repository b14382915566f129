"""What the demo model writes (demo/answers.py): the final answer from tool results, with a
generative UI component for workspace results, the help text and the note to enable toolsets."""

from __future__ import annotations

import json
import re

from .helpers import (
    ALL_TOOLS,
    STALE_TASKS,
    TASK_FIELDS,
    TOKYO_AND_MATH,
    TOKYO_TIME,
    UNREAD_EMAILS,
    WEEK_EVENTS,
    WORKSPACE_TOOLS,
    YESTERDAYS_MEETINGS,
    assert_one_streamed_component,
    components,
    days,
    saved_post,
    stream,
    task,
    tool_result,
    user,
    workspace_turns,
)


def test_tool_results_give_the_final_answer() -> None:
    messages = user(TOKYO_AND_MATH)
    first = stream(messages)
    time_call, math_call = first.tool_calls()
    messages += [
        first.assistant_message(),
        tool_result(time_call, TOKYO_TIME),
        tool_result(math_call, {"expression": "12*7", "result": 84}),
    ]

    final = stream(messages)

    assert final.finish_reason == "stop"
    assert final.calls == {}
    assert "84" in final.text
    assert "23:52" in final.text
    assert "Tokyo" in final.text
    assert final.text == "It's **23:52** in Tokyo (JST, Sunday, 22 November 2026), and **12 × 7 = 84**."


def test_no_intent_gives_the_help_text() -> None:
    turn = stream(user("Write me a poem about autumn"))

    assert turn.finish_reason == "stop"
    assert turn.calls == {}
    assert "offline demo model" in turn.text
    assert "- **Time**" in turn.text
    assert "> Write me a poem about autumn" in turn.text


def test_search_fetch_error_and_unknown_results_are_all_mentioned() -> None:
    calls = [
        {"id": "c1", "name": "toolset__exa__search", "arguments": {"query": "AI news"}},
        {
            "id": "c2",
            "name": "toolset__web__fetch_page",
            "arguments": {"url": "https://example.com/a"},
        },
        {
            "id": "c3",
            "name": "toolset__clock_math__current_time",
            "arguments": {"timezone": "Mars/Base"},
        },
        {"id": "c4", "name": "toolset__other__thing", "arguments": {}},
    ]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["arguments"]),
                },
            }
            for c in calls
        ],
    }
    search = {
        "results": [
            {
                "title": "Model [v2] released",
                "url": "https://news.example/one",
                "published_date": "2026-11-20T10:00:00Z",
            },
            {"title": "Evil", "url": "javascript:alert(1)", "text": "x"},
        ]
    }
    page = {
        "url": "https://example.com/a",
        "title": "Example page",
        "text": "First sentence here. Second one follows! Third is dropped.",
        "truncated": False,
    }
    messages = [
        *user("Search for AI news, read https://example.com/a and tell me the time on Mars"),
        assistant,
        tool_result(calls[0], search),
        tool_result(calls[1], page),
        tool_result(calls[2], "Error: unknown timezone 'Mars/Base'"),
        tool_result(calls[3], {"status": "ok", "items": [1, 2, 3]}),
    ]

    text = stream(messages).text

    assert "- [Model \\[v2\\] released](https://news.example/one) (2026-11-20)" in text
    assert "](javascript:" not in text
    assert "**[Example page](https://example.com/a)**: First sentence here. Second one follows!" in text
    assert "Third is dropped" not in text
    assert "`current_time` tool failed" in text
    assert "> Error: unknown timezone 'Mars/Base'" in text
    assert "`thing` tool returned" in text and "status" in text


def test_stale_tasks_answer_with_a_task_table() -> None:
    call, final = workspace_turns("Summarize stale tasks across projects", STALE_TASKS)

    assert (call["name"], call["arguments"]) == ("toolset__workspace__list_tasks", {"stale_days": 7})
    rows = assert_one_streamed_component(final, "task_table")
    assert [row["name"] for row in rows] == [t["name"] for t in STALE_TASKS["tasks"]]
    assert all(set(row) == TASK_FIELDS for row in rows)
    assert rows[2] == STALE_TASKS["tasks"][2]
    assert final.text.startswith("6 tasks across 3 projects haven't been updated in 7 days or more.\n\n")
    # Overdue first, then by priority: the urgent crash beats the older, low-priority review.
    assert final.text.endswith(
        "Most pressing: **Fix crash on Android 14 login** in Mobile app 2.0 – urgent priority, "
        "3 days overdue and untouched for 15 days, assigned to Sam Okafor."
    )


def test_calendar_answer_with_calendar_events() -> None:
    call, final = workspace_turns("What's on my calendar this week?", WEEK_EVENTS)

    assert (call["name"], call["arguments"]) == ("toolset__workspace__list_events", {})
    events = assert_one_streamed_component(final, "calendar_events")
    assert events[0] == {
        "title": "Sprint planning",
        "start": WEEK_EVENTS["events"][0]["start"],
        "end": WEEK_EVENTS["events"][0]["end"],
        "attendees": ["Alice Moreau", "Sam Okafor", "Lena Fischer", "Jordan Lee"],
        "location": "Room Atlas",
    }
    assert [e["title"] for e in events] == ["Sprint planning", "Homepage design review", "Daily stand-up"]
    assert final.text.startswith("You have 3 events this week (")


def test_unread_emails_answer_with_an_email_summary() -> None:
    call, final = workspace_turns("Any unread emails?", UNREAD_EMAILS)

    assert (call["name"], call["arguments"]) == ("toolset__workspace__list_emails", {"unread_only": True})
    emails = assert_one_streamed_component(final, "email_summary")
    assert emails[0] == {
        "from": "Priya Natarajan",
        "subject": "Homepage copy – v3 for review",
        "snippet": UNREAD_EMAILS["emails"][0]["snippet"],
        "date": UNREAD_EMAILS["emails"][0]["receivedAt"],
        "unread": True,
    }
    assert len(emails) == 2
    assert final.text.startswith("You have 2 unread emails:")


def test_meeting_answer_with_a_meeting_summary() -> None:
    call, final = workspace_turns("Summarize yesterday's meeting", YESTERDAYS_MEETINGS)

    # list_meetings already returns the summary and action items: one step is enough.
    assert (call["name"], call["arguments"]) == ("toolset__workspace__list_meetings", {"date": "yesterday"})
    meeting = assert_one_streamed_component(final, "meeting_summary")
    assert meeting == {
        "title": "Website relaunch sync",
        "date": days(-1),
        "attendees": ["Alice Moreau", "Priya Natarajan", "Marco Rossi", "Dana Whitfield"],
        "summary": "Reviewed the relaunch timeline with Acme. Homepage copy is nearly final.",
        "actionItems": [
            {"text": "Send Dana a launch date with a buffer for redirects", "owner": "Alice Moreau", "done": False},
            {"text": "Share homepage copy v3 for review", "owner": "Priya Natarajan", "done": True},
        ],
    }
    assert final.text.startswith("Yesterday's meeting was **Website relaunch sync**")
    assert "1 of 2 action items is still open" in final.text


def test_linkedin_post_is_drafted_and_shown() -> None:
    call, final = workspace_turns("Draft a LinkedIn post about our launch", saved_post)

    assert call["name"] == "toolset__workspace__draft_social_post"
    assert call["arguments"]["platform"] == "linkedin"
    text = call["arguments"]["text"]
    assert 3 <= len(re.findall(r"[.!?](?:\s|$)", text)) <= 5
    assert "launch" in text.lower() and len(text) <= 3000
    post = assert_one_streamed_component(final, "social_post")
    assert post == {"platform": "linkedin", "author": "You", "text": text}
    assert "saved it to your drafts" in final.text
    assert "hasn't been published" in final.text


def test_task_details_answer_with_a_task_card() -> None:
    found = {**STALE_TASKS["tasks"][5], "id": 12}
    call, final = workspace_turns("Show task 12", found)

    assert (call["name"], call["arguments"]) == ("toolset__workspace__get_task", {"task_id": 12})
    card = assert_one_streamed_component(final, "task_card")
    assert card == found
    assert final.text.startswith("Here's task #12:")
    assert final.text.endswith("It's 2 days overdue.")


def test_created_task_is_shown_as_a_card() -> None:
    created = task(15, "Fix login bug", "TODO", "HIGH", 9, "Sam", "Website relaunch", 0)
    call, final = workspace_turns('Create a task "Fix login bug" in Website relaunch', created)

    assert call["arguments"] == {"project": "Website relaunch", "name": "Fix login bug"}
    assert assert_one_streamed_component(final, "task_card") == created
    assert final.text.startswith("I created **Fix login bug** in Website relaunch:")


def test_several_workspace_results_give_several_components() -> None:
    messages = user("Any unread emails, and what's on my calendar this week?")
    first = stream(messages, tools=WORKSPACE_TOOLS)
    emails, events = first.tool_calls()
    messages += [first.assistant_message(), tool_result(emails, UNREAD_EMAILS), tool_result(events, WEEK_EVENTS)]

    final = stream(messages, tools=WORKSPACE_TOOLS)

    assert [kind for kind, _ in components(final.text)] == ["email_summary", "calendar_events"]


def test_empty_workspace_results_answer_without_a_component() -> None:
    _, final = workspace_turns("Summarize stale tasks", {"tasks": [], "count": 0, "projects": []})

    assert final.text == "Every open task was updated in the last 7 days – nothing is stale."


def test_workspace_error_is_reported_plainly() -> None:
    error = "Error (execution_error): Unknown project 'Apollo'. Your projects: Mobile app 2.0, Q3 marketing."
    _, final = workspace_turns("Overdue tasks in the Apollo project", error)

    assert ":::component" not in final.text
    assert "`list_tasks` tool failed" in final.text
    assert f"> {error}" in final.text


def test_workspace_not_offered_asks_to_enable_and_set_it_up() -> None:
    turn = stream(user("Summarize stale tasks across projects"), tools=ALL_TOOLS)

    assert turn.calls == {}
    assert "**Workspace** (`workspace`)" in turn.text
    assert "Create sample data" in turn.text


def test_help_text_lists_workspace_examples() -> None:
    text = stream(user("Write me a poem about autumn")).text

    assert "- **Workspace**" in text
    assert "Summarize stale tasks across projects" in text
    assert "Draft a LinkedIn post about our launch" in text
