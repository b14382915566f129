"""What the demo model decides to do (demo/planner.py): call the offered tools for what it
read, in parallel and with stable ids, or answer in text when it has no tools, is told to stop
using them, or is asked for a canned behaviour."""

from __future__ import annotations

from .helpers import (
    ALL_TOOLS,
    LIMIT_MESSAGE,
    TOKYO_AND_MATH,
    TOKYO_TIME,
    WORKSPACE_TOOLS,
    stream,
    tool_result,
    user,
)


def test_two_intents_give_two_parallel_streamed_tool_calls() -> None:
    turn = stream(user(TOKYO_AND_MATH))

    assert turn.finish_reason == "tool_calls"
    assert turn.text == ""
    calls = turn.tool_calls()
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("toolset__clock_math__current_time", {"timezone": "Asia/Tokyo"}),
        ("toolset__clock_math__calculate", {"expression": "12*7"}),
    ]
    assert sorted(turn.calls) == [0, 1]
    for slot in turn.calls.values():
        assert len(slot["pieces"]) >= 2, "arguments must arrive in several fragments"
    ids = [c["id"] for c in calls]
    assert all(i.startswith("call_demo_") for i in ids)
    assert len(set(ids)) == 2


def test_same_input_gives_the_same_output() -> None:
    assert stream(user(TOKYO_AND_MATH)).tool_calls() == stream(user(TOKYO_AND_MATH)).tool_calls()
    assert stream(user("hello")).text == stream(user("hello")).text


def test_only_offered_tools_are_called() -> None:
    clock_only = ALL_TOOLS[:2]
    turn = stream(
        user("What time is it in London, and search for the latest news about AI"),
        tools=clock_only,
    )

    assert [c["name"] for c in turn.tool_calls()] == ["toolset__clock_math__current_time"]
    assert turn.tool_calls()[0]["arguments"] == {"timezone": "Europe/London"}


def test_search_and_fetch_intents() -> None:
    search = stream(user("What's the latest news about AI?")).tool_calls()
    assert search == [
        {
            "id": search[0]["id"],
            "name": "toolset__exa__search",
            "arguments": {"query": "latest news about AI", "num_results": 5},
        }
    ]
    fetch = stream(user("Please summarize https://example.com/post.html.")).tool_calls()
    assert [(c["name"], c["arguments"]) for c in fetch] == [
        ("toolset__web__fetch_page", {"url": "https://example.com/post.html"})
    ]


def test_tools_not_offered_means_no_tool_calls() -> None:
    turn = stream(user(TOKYO_AND_MATH), tools=None)

    assert turn.calls == {}
    assert turn.finish_reason == "stop"
    assert "`clock_math`" in turn.text


def test_iteration_limit_message_means_no_tool_calls() -> None:
    messages = user(TOKYO_AND_MATH)
    first = stream(messages)
    time_call, _ = first.tool_calls()
    messages += [
        first.assistant_message(),
        tool_result(time_call, TOKYO_TIME),
        {"role": "system", "content": LIMIT_MESSAGE},
    ]

    turn = stream(messages)

    assert turn.calls == {}
    assert turn.finish_reason == "stop"
    assert "23:52" in turn.text


def test_iteration_limit_without_results_still_answers_in_text() -> None:
    turn = stream([*user(TOKYO_AND_MATH), {"role": "system", "content": LIMIT_MESSAGE}])

    assert turn.calls == {}
    assert turn.text


def test_workspace_questions_call_the_offered_workspace_tools() -> None:
    calls = stream(user("Any unread emails, and summarize yesterday's meeting"), tools=WORKSPACE_TOOLS).tool_calls()
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("toolset__workspace__list_emails", {"unread_only": True}),
        ("toolset__workspace__list_meetings", {"date": "yesterday"}),
    ]


def test_special_trigger_slow_streams_a_long_markdown_answer() -> None:
    turn = stream(user("[demo:slow]"))

    assert len(turn.text.split()) >= 250
    assert "\n- " in turn.text
    assert "```python" in turn.text
    assert turn.finish_reason == "stop"
