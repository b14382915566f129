"""The worker's sink: batching, ordering, sequence numbers, live state and tool progress."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from chat import live
from chat.agent.loop import Outcome
from chat.agent.types import AssistantMessage, ToolCall, ToolResult
from chat.events import group_name
from chat.models import Chat, Turn
from chat.streaming import TurnSink

pytestmark = pytest.mark.django_db(transaction=True)


async def drain(layer: InMemoryChannelLayer, channel: str) -> list[dict[str, Any]]:
    messages = []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), 0.05))
        except TimeoutError:
            return messages


async def make_sink(user: Any, window_ms: int = 30) -> tuple[TurnSink, InMemoryChannelLayer, str, Any]:
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(chat.pk), channel)
    redis = live.async_client()
    return TurnSink(turn, redis, window_ms=window_ms, layer=layer), layer, channel, redis


async def test_text_is_batched_into_one_fragment_with_only_new_characters(user: Any) -> None:
    sink, layer, channel, redis = await make_sink(user)
    await sink.step_started(0)
    for word in ["Hello ", "there, ", "how ", "are ", "you?"]:
        await sink.text(0, word)
    await asyncio.sleep(0.1)
    messages = await drain(layer, channel)
    # The step's first words leave at once (leading edge), the rest in one batch.
    assert [m["seq"] for m in messages] == [1, 2, 3]
    assert messages[1]["html"] == f'<div hx-swap-oob="beforeend:#tail-{sink.turn_id}-0">Hello </div>'
    assert messages[2]["html"] == f'<div hx-swap-oob="beforeend:#tail-{sink.turn_id}-0">there, how are you?</div>'
    await sink.text(0, " Fine.")
    await asyncio.sleep(0.1)
    (fourth,) = await drain(layer, channel)
    assert fourth["seq"] == 4 and ">Hello" not in fourth["html"] and " Fine." in fourth["html"]
    state = json.loads(await redis.get(live.key(sink.turn_id, "live")))
    assert state["seq"] == 4 and state["steps"][0]["text"] == "Hello there, how are you? Fine."
    await redis.aclose()


async def test_the_first_text_of_each_step_does_not_wait_for_the_window(user: Any) -> None:
    sink, layer, channel, redis = await make_sink(user, window_ms=10_000)
    await sink.step_started(0)
    await sink.text(0, "First")
    await sink.text(0, " words")
    sent = await drain(layer, channel)
    assert "First" in sent[-1]["html"] and " words" not in sent[-1]["html"]  # the rest waits
    await sink.assistant_message(0, AssistantMessage(content="First words"), "complete")
    await sink.step_started(1)
    await drain(layer, channel)
    await sink.text(1, "Then")
    (then,) = await drain(layer, channel)
    assert "Then" in then["html"]
    await redis.aclose()


async def test_events_flush_pending_text_first(user: Any) -> None:
    sink, layer, channel, redis = await make_sink(user, window_ms=10_000)
    await sink.step_started(0)
    await sink.text(0, "Let me")  # the step's first words: sent at once
    await sink.text(0, " check.")  # pending in the window
    await sink.tools_started(0, [ToolCall("c1", "toolset__clock_math__calculate", '{"expression": "1+1"}')])
    messages = await drain(layer, channel)
    html = messages[-1]["html"]
    assert html.index(" check.") < html.index("card-")
    await redis.aclose()


async def test_tool_progress_is_shown_live_and_never_after_the_result(user: Any) -> None:
    sink, layer, channel, redis = await make_sink(user)
    call = ToolCall("c1", "toolset__web__fetch_page", '{"url": "https://example.com"}')
    await sink.step_started(0)
    await sink.tools_started(0, [call])
    await drain(layer, channel)
    await sink.tool_progress(0, 0, "Reading example.com… 40 KB", 40)
    (progress,) = await drain(layer, channel)
    assert 'aria-valuenow="40"' in progress["html"] and "Reading example.com… 40 KB" in progress["html"]
    await sink.tool_progress(0, 0, "Reading example.com… 41 KB", 41)  # within the interval: skipped
    assert await drain(layer, channel) == []
    result = ToolResult("c1", "{}", data={"result": {"title": "Example", "text": "x"}})
    await sink.tool_finished(0, 0, call, result)
    await sink.tool_progress(0, 0, "late report", 100)
    messages = await drain(layer, channel)
    assert len(messages) == 1 and 'data-status="success"' in messages[0]["html"]
    await redis.aclose()


async def test_finish_stores_turn_and_pushes_final_state(user: Any) -> None:
    sink, layer, channel, redis = await make_sink(user)
    await sink.step_started(0)
    await sink.text(0, "Partial")
    await sink.assistant_message(0, AssistantMessage(content="Partial"), "stopped")
    await sink.finish(Outcome("cancelled", 0))
    messages = await drain(layer, channel)
    assert 'data-turn-status="cancelled"' in messages[-1]["html"] and "Stopped" in messages[-1]["html"]
    turn = await Turn.objects.aget(pk=sink.turn_id)
    assert turn.status == Turn.Status.CANCELLED and turn.finished_at is not None
    await redis.aclose()
