"""The demo model as a LiteLLM provider (demo/provider.py): sync, async, streaming and not,
usage, pacing at the configured rate, and simulated provider failures."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import litellm
import pytest

from demo.provider import TOKENS_PER_SECOND_ENV, text_pieces

from .helpers import (
    ALL_TOOLS,
    MODEL,
    STALE_TASKS,
    TOKYO_AND_MATH,
    WORKSPACE_TOOLS,
    Turn,
    astream,
    stream,
    tool_result,
    user,
)


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
