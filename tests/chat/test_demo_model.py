"""The offline demo model, driven through LiteLLM exactly as the chat loop drives it.

Plain pytest, no Django: the demo package must not depend on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
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
