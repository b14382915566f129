"""The offline demo model, driven through LiteLLM exactly as the chat loop drives it.

Plain pytest, no Django: the demo package must not depend on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from datetime import date, timedelta
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest

import chat.demo
from chat.demo.intents import detect_intents
from chat.demo.provider import TOKENS_PER_SECOND_ENV, text_pieces

litellm.suppress_debug_info = True
chat.demo.register()

MODEL = "demo/tessera"
TOKYO_AND_MATH = "What time is it in Tokyo, and what is 12*7?"
LIMIT_MESSAGE = "You have reached the maximum number of tool calls. Answer now without using any tools."
TOKYO_TIME = {
    "timezone": "Asia/Tokyo",
    "iso": "2026-11-22T23:52:00+09:00",
    "display": "23:52",
    "date": "Sunday, 22 November 2026",
    "utc_offset": "+09:00",
    "abbreviation": "JST",
}


def tool(toolset: str, name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": f"toolset__{toolset}__{name}",
            "description": f"{name} from {toolset}",
            "parameters": {"type": "object", "properties": {}},
        },
    }


ALL_TOOLS = [
    tool("clock_math", "current_time"),
    tool("clock_math", "calculate"),
    tool("exa", "search"),
    tool("web", "fetch_page"),
]


def user(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are Tessera."},
        {"role": "user", "content": text},
    ]


class Turn:
    """What one streamed response amounted to, accumulated the way the chat loop does it."""

    def __init__(self) -> None:
        self.text = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.chunks = 0
        self.arrivals: list[float] = []
        self.pieces: list[str] = []

    def add(self, chunk: Any) -> None:
        self.chunks += 1
        if getattr(chunk, "usage", None):
            self.usage = chunk.usage
        if not chunk.choices:
            return
        choice = chunk.choices[0]
        self.finish_reason = choice.finish_reason or self.finish_reason
        delta = choice.delta
        if delta.content:
            self.text += delta.content
            self.pieces.append(delta.content)
            self.arrivals.append(time.monotonic())
        for call in delta.tool_calls or ():
            slot = self.calls.setdefault(call.index, {"id": None, "name": None, "pieces": []})
            if call.id:
                slot["id"] = call.id
            if call.function.name:
                slot["name"] = call.function.name
            if call.function.arguments:
                slot["pieces"].append(call.function.arguments)

    def tool_calls(self) -> list[dict[str, Any]]:
        return [
            {
                "id": slot["id"],
                "name": slot["name"],
                "arguments": json.loads("".join(slot["pieces"]) or "{}"),
            }
            for _, slot in sorted(self.calls.items())
        ]

    def assistant_message(self) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": self.text or None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["arguments"]),
                    },
                }
                for call in self.tool_calls()
            ],
        }


async def astream(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = ALL_TOOLS,
    **kwargs: Any,
) -> Turn:
    kwargs.setdefault("tokens_per_second", 0)
    if tools is not None:
        kwargs["tools"] = tools
    turn = Turn()
    response = await litellm.acompletion(model=MODEL, messages=messages, stream=True, **kwargs)
    async for chunk in response:
        turn.add(chunk)
    return turn


def stream(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = ALL_TOOLS,
    **kwargs: Any,
) -> Turn:
    return asyncio.run(astream(messages, tools, **kwargs))


def tool_result(call: dict[str, Any], content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"role": "tool", "tool_call_id": call["id"], "content": text}


# --- tool calls ---------------------------------------------------------------


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
        ("The meeting is on 2026-11-22", []),
        ("tell me a joke", []),
    ],
)
def test_intent_table(text: str, expected: list[tuple[str, dict[str, Any]]]) -> None:
    assert [(i.tool, i.arguments) for i in detect_intents(text)] == expected


# --- text answers -----------------------------------------------------------------


def test_no_intent_gives_the_help_text() -> None:
    turn = stream(user("Write me a poem about autumn"))

    assert turn.finish_reason == "stop"
    assert turn.calls == {}
    assert "offline demo model" in turn.text
    assert "- **Time**" in turn.text
    assert "> Write me a poem about autumn" in turn.text


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


def test_special_trigger_slow_streams_a_long_markdown_answer() -> None:
    turn = stream(user("[demo:slow]"))

    assert len(turn.text.split()) >= 250
    assert "\n- " in turn.text
    assert "```python" in turn.text
    assert turn.finish_reason == "stop"


# --- non-streaming and sync paths -----------------------------------------------------


def test_sync_streaming_and_non_streaming_variants() -> None:
    turn = Turn()
    for chunk in litellm.completion(
        model=MODEL,
        messages=user(TOKYO_AND_MATH),
        tools=ALL_TOOLS,
        stream=True,
        tokens_per_second=0,
    ):
        turn.add(chunk)
    assert [c["arguments"] for c in turn.tool_calls()] == [
        {"timezone": "Asia/Tokyo"},
        {"expression": "12*7"},
    ]

    response = litellm.completion(model=MODEL, messages=user(TOKYO_AND_MATH), tools=ALL_TOOLS, tokens_per_second=0)
    message = response.choices[0].message
    assert response.choices[0].finish_reason == "tool_calls"
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [
        {"timezone": "Asia/Tokyo"},
        {"expression": "12*7"},
    ]
    assert response.usage.completion_tokens > 0

    async def text_reply() -> Any:
        return await litellm.acompletion(model=MODEL, messages=user("hello"), tokens_per_second=0)

    reply = asyncio.run(text_reply())
    assert "offline demo model" in reply.choices[0].message.content
    assert reply.choices[0].finish_reason == "stop"


def test_usage_arrives_on_the_final_chunk() -> None:
    turn = stream(user("hello"), stream_options={"include_usage": True})

    assert turn.usage is not None
    assert turn.usage.prompt_tokens > 0
    assert turn.usage.completion_tokens == len(text_pieces(turn.text))


# --- pacing -----------------------------------------------------------------------


def test_zero_tokens_per_second_is_fast() -> None:
    started = time.monotonic()
    turn = stream(user("[demo:slow]"), tokens_per_second=0)
    assert time.monotonic() - started < 1.0
    assert len(turn.text) > 1000


def test_default_rate_is_about_40_tokens_per_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TOKENS_PER_SECOND_ENV, raising=False)
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"

    async def measure() -> tuple[float, Turn]:
        started = time.monotonic()
        turn = Turn()
        # The help text, at the default rate: long enough to measure, no tools to wait for.
        response = await litellm.acompletion(model=MODEL, messages=user(text), stream=True)
        async for chunk in response:
            turn.add(chunk)
            if len(turn.arrivals) >= 21:
                break
        return started, turn

    started, turn = asyncio.run(measure())
    first_token = turn.arrivals[0] - started
    rate = (len(turn.arrivals) - 1) / (turn.arrivals[-1] - turn.arrivals[0])
    assert 0.05 < first_token < 1.0
    assert 20 <= rate <= 60


def test_rate_comes_from_the_environment_and_the_call_overrides_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKENS_PER_SECOND_ENV, "0")
    started = time.monotonic()
    asyncio.run(_collect_without_rate(user("[demo:slow]")))
    assert time.monotonic() - started < 1.0

    started = time.monotonic()
    # About 70 pieces of help text at 100 per second.
    stream(user("hi"), tools=None, tokens_per_second=100)
    assert time.monotonic() - started > 0.35


async def _collect_without_rate(messages: list[dict[str, Any]]) -> Turn:
    turn = Turn()
    async for chunk in await litellm.acompletion(model=MODEL, messages=messages, stream=True):
        turn.add(chunk)
    return turn


def test_concurrent_streams_share_the_event_loop() -> None:
    async def many() -> list[Turn]:
        return await asyncio.gather(*(astream(user(f"hi {n}"), tools=None, tokens_per_second=200) for n in range(10)))

    started = time.monotonic()
    single = stream(user("hi"), tools=None, tokens_per_second=200)
    single_duration = time.monotonic() - started
    started = time.monotonic()
    turns = asyncio.run(many())
    assert time.monotonic() - started < single_duration * 3
    assert all(t.text == single.text.replace("> hi", f"> hi {n}") for n, t in enumerate(turns))


def test_invalid_rate_is_a_bad_request() -> None:
    with pytest.raises(litellm.exceptions.BadRequestError):
        stream(user("hi"), tokens_per_second=-1)


# --- simulated failures ---------------------------------------------------------------


def test_fail_before_raises_before_any_chunk() -> None:
    chunks: list[Any] = []

    async def run() -> None:
        response = await litellm.acompletion(
            model=MODEL,
            messages=user("please [demo:fail-before]"),
            stream=True,
            tokens_per_second=0,
        )
        async for chunk in response:
            chunks.append(chunk)

    with pytest.raises(litellm.exceptions.ServiceUnavailableError):
        asyncio.run(run())
    assert chunks == []

    with pytest.raises(litellm.exceptions.ServiceUnavailableError):
        litellm.completion(
            model=MODEL,
            messages=user("[demo:fail-before]"),
            stream=True,
            tokens_per_second=0,
        )


def test_fail_mid_raises_after_some_chunks() -> None:
    for collect in (_collect_async, _collect_sync):
        turn = Turn()
        # LiteLLM wraps a mid-stream failure in MidStreamFallbackError (a ServiceUnavailableError)
        # around the mapped InternalServerError, so that a Router could fall back.
        with pytest.raises(litellm.exceptions.ServiceUnavailableError) as caught:
            collect(turn)
        assert isinstance(caught.value, litellm.exceptions.MidStreamFallbackError)
        assert isinstance(caught.value.original_exception, litellm.exceptions.InternalServerError)
        assert turn.chunks >= 3
        assert turn.text
        assert turn.finish_reason is None


def _collect_async(turn: Turn) -> None:
    async def run() -> None:
        response = await litellm.acompletion(
            model=MODEL,
            messages=user("[demo:fail-mid]"),
            stream=True,
            tokens_per_second=0,
        )
        async for chunk in response:
            turn.add(chunk)

    asyncio.run(run())


def _collect_sync(turn: Turn) -> None:
    for chunk in litellm.completion(model=MODEL, messages=user("[demo:fail-mid]"), stream=True, tokens_per_second=0):
        turn.add(chunk)


def test_register_is_idempotent() -> None:
    chat.demo.register()
    chat.demo.register()
    assert [item["provider"] for item in litellm.custom_provider_map].count("demo") == 1
    assert litellm.get_llm_provider(MODEL)[1] == "demo"


# --- workspace and generative UI components -----------------------------------------

WORKSPACE_TOOLS = [
    tool("workspace", name)
    for name in (
        "list_projects",
        "list_tasks",
        "get_task",
        "create_task",
        "update_task",
        "list_events",
        "list_emails",
        "get_email",
        "list_meetings",
        "get_meeting",
        "draft_social_post",
    )
]
TASK_FIELDS = {"id", "name", "status", "priority", "dueDate", "assignee", "project", "updatedAt"}
COMPONENT_RE = re.compile(r'^:::component\{type="(?P<type>[a-z_]+)"\}\n(?P<json>[^\n]*)\n:::$', re.MULTILINE)
TODAY = date.today()


def days(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def stamp(offset: int, clock: str = "09:00:00") -> str:
    return f"{days(offset)}T{clock}+00:00"


# Shaped exactly like toolsets/workspace/tools.py returns them, with the sample data's content.
def task(
    id_: int, name: str, status: str, priority: str, due: int | None, assignee: str, project: str, idle: int
) -> dict[str, Any]:
    return {
        "id": id_,
        "name": name,
        "status": status,
        "priority": priority,
        "dueDate": days(due) if due is not None else None,
        "assignee": assignee,
        "project": project,
        "updatedAt": stamp(-idle, "13:49:32"),
    }


STALE_TASKS: dict[str, Any] = {
    "tasks": [
        task(14, "Competitor pricing review", "TODO", "LOW", -6, "Jordan Lee", "Q3 marketing", 30),
        task(8, "Push notification settings screen", "TODO", "MEDIUM", 14, "Lena Fischer", "Mobile app 2.0", 20),
        task(7, "Fix crash on Android 14 login", "TODO", "URGENT", -3, "Sam Okafor", "Mobile app 2.0", 15),
        task(2, "Migrate blog posts to the new CMS", "TODO", "MEDIUM", 10, "Marco Rossi", "Website relaunch", 12),
        task(12, "Book webinar speakers", "BLOCKED", "MEDIUM", 7, "Alex Kim", "Q3 marketing", 11),
        task(3, "Set up redirects for old URLs", "BLOCKED", "HIGH", -2, "Marco Rossi", "Website relaunch", 9),
    ],
    "count": 6,
    "projects": ["Mobile app 2.0", "Q3 marketing", "Website relaunch"],
}
WEEK_EVENTS: dict[str, Any] = {
    "events": [
        {
            "id": 1,
            "title": "Sprint planning",
            "start": stamp(-TODAY.weekday(), "10:00:00"),
            "end": stamp(-TODAY.weekday(), "11:00:00"),
            "attendees": ["Alice Moreau", "Sam Okafor", "Lena Fischer", "Jordan Lee"],
            "location": "Room Atlas",
        },
        {
            "id": 3,
            "title": "Homepage design review",
            "start": stamp(2 - TODAY.weekday(), "14:00:00"),
            "end": stamp(2 - TODAY.weekday(), "15:00:00"),
            "attendees": ["Alice Moreau", "Priya Natarajan", "Marco Rossi"],
            "location": "",
        },
        {
            "id": 6,
            "title": "Daily stand-up",
            "start": stamp(0, "09:30:00"),
            "end": stamp(0, "09:45:00"),
            "attendees": ["Alice Moreau", "Sam Okafor", "Priya Natarajan", "Marco Rossi"],
            "location": "Video call",
        },
    ],
    "count": 3,
    "startDate": days(-TODAY.weekday()),
    "endDate": days(6 - TODAY.weekday()),
}
UNREAD_EMAILS: dict[str, Any] = {
    "emails": [
        {
            "id": 1,
            "sender": {"name": "Priya Natarajan", "email": "priya@northwind.example"},
            "subject": "Homepage copy – v3 for review",
            "snippet": "Hi! v3 of the homepage copy is in the shared doc. I tightened the hero line and cut…",
            "receivedAt": stamp(0, "15:07:32"),
            "unread": True,
        },
        {
            "id": 3,
            "sender": {"name": "Dana Whitfield", "email": "dana@acme-corp.example"},
            "subject": "Re: Launch date for the new site",
            "snippet": "Thanks for the update. Our board meets at the end of the month, so a launch…",
            "receivedAt": stamp(0, "10:49:32"),
            "unread": True,
        },
    ],
    "count": 2,
    "unreadCount": 2,
    "unreadOnly": True,
}
YESTERDAYS_MEETINGS: dict[str, Any] = {
    "meetings": [
        {
            "id": 1,
            "title": "Website relaunch sync",
            "start": stamp(-1, "10:00:00"),
            "date": days(-1),
            "attendees": ["Alice Moreau", "Priya Natarajan", "Marco Rossi", "Dana Whitfield"],
            "summary": "Reviewed the relaunch timeline with Acme. Homepage copy is nearly final.",
            "actionItems": [
                {"text": "Send Dana a launch date with a buffer for redirects", "owner": "Alice Moreau", "done": False},
                {"text": "Share homepage copy v3 for review", "owner": "Priya Natarajan", "done": True},
            ],
        }
    ],
    "count": 1,
    "date": days(-1),
}


def saved_post(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": 3,
        "platform": arguments["platform"],
        "platformName": "LinkedIn",
        "text": arguments["text"],
        "status": "draft",
        "createdAt": stamp(0, "15:49:32"),
        "characters": len(arguments["text"]),
        "limit": 3000,
    }


def components(text: str) -> list[tuple[str, Any]]:
    return [(m["type"], json.loads(m["json"])) for m in COMPONENT_RE.finditer(text)]


def pieces_overlapping(turn: Turn, start: int, end: int) -> int:
    count, offset = 0, 0
    for piece in turn.pieces:
        if offset < end and offset + len(piece) > start:
            count += 1
        offset += len(piece)
    return count


def workspace_turns(question: str, result: Any) -> tuple[dict[str, Any], Turn]:
    """The tool call the question gets, and the final answer once `result` comes back."""
    messages = user(question)
    first = stream(messages, tools=WORKSPACE_TOOLS)
    assert first.finish_reason == "tool_calls"
    [call] = first.tool_calls()
    content = result(call["arguments"]) if callable(result) else result
    messages += [first.assistant_message(), tool_result(call, content)]
    final = stream(messages, tools=WORKSPACE_TOOLS)
    assert final.finish_reason == "stop"
    assert final.calls == {}
    return call, final


def assert_one_streamed_component(turn: Turn, kind: str) -> Any:
    [(found, data)] = components(turn.text)
    assert found == kind
    match = COMPONENT_RE.search(turn.text)
    assert match is not None
    assert pieces_overlapping(turn, match.start("json"), match.end("json")) >= 3, "the JSON must stream in pieces"
    # Text before and after the block, each separated from it by a blank line.
    assert turn.text[: match.start()].strip() and turn.text[: match.start()].endswith("\n\n")
    assert turn.text[match.end() :].startswith("\n\n") or not turn.text[match.end() :]
    return data


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


def test_workspace_questions_call_the_offered_workspace_tools() -> None:
    calls = stream(user("Any unread emails, and summarize yesterday's meeting"), tools=WORKSPACE_TOOLS).tool_calls()
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("toolset__workspace__list_emails", {"unread_only": True}),
        ("toolset__workspace__list_meetings", {"date": "yesterday"}),
    ]


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


@pytest.mark.parametrize("platform", ["x", "bluesky", "mastodon"])
def test_posts_fit_the_platform(platform: str) -> None:
    names = {"x": "an X", "bluesky": "a Bluesky", "mastodon": "a Mastodon"}
    [intent] = detect_intents(f"Write {names[platform]} post about the launch of Acme Cloud")
    assert intent.arguments["platform"] == platform
    assert "Acme Cloud" in intent.arguments["text"]
    assert len(intent.arguments["text"]) <= {"x": 280, "bluesky": 300, "mastodon": 500}[platform]


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


def test_component_answers_stream_at_the_configured_rate() -> None:
    messages = user("Summarize stale tasks across projects")
    first = stream(messages, tools=WORKSPACE_TOOLS)
    [call] = first.tool_calls()
    messages += [first.assistant_message(), tool_result(call, STALE_TASKS)]

    started = time.monotonic()
    final = stream(messages, tools=WORKSPACE_TOOLS, tokens_per_second=500, stream_options={"include_usage": True})
    elapsed = time.monotonic() - started

    pieces = text_pieces(final.text)
    assert "".join(pieces) == final.text
    assert final.pieces == pieces
    assert final.usage.completion_tokens == len(pieces)
    assert elapsed >= (len(pieces) - 1) / 500
