"""The worker's sink: batching, ordering, sequence numbers, live state and tool progress."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from agent.loop import Outcome
from agent.types import AssistantMessage, ToolCall, ToolResult
from chat import live
from chat.events import group_name
from chat.models import Chat, Turn
from chat.worker.streaming import TurnSink

pytestmark = pytest.mark.django_db(transaction=True)


async def drain(layer: InMemoryChannelLayer, channel: str) -> list[dict[str, Any]]:
    messages = []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), 0.05))
        except TimeoutError:
            return messages


async def make_sink(user: Any, window_ms: int = 30, layer: Any = None) -> tuple[TurnSink, Any, str, Any]:
    """A sink for a new running turn, a channel in its chat's group, and a Redis client. The
    layer is an in-memory one unless given (the settings' pub/sub layer, as a worker has)."""
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    layer = layer or InMemoryChannelLayer()
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
    # The growing block shows rendered (chat/open_block.py): set whole first, then words appended
    # inside its paragraph.
    tail = f"tail-{sink.turn_id}-0"
    assert messages[1]["html"] == f'<div id="{tail}" class="md-tail" hx-swap-oob="true"><p>Hello </p></div>'
    assert messages[2]["html"] == f'<div hx-swap-oob="beforeend:#{tail}>:last-child">there, how are you?</div>'
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


async def pubsub_sink(user: Any) -> tuple[TurnSink, Any, str, Any]:
    from channels.layers import get_channel_layer

    return await make_sink(user, layer=get_channel_layer())


@pytest.fixture
def timer_tasks(monkeypatch: Any) -> list[int]:
    """The sequence number a sink had each time its timer handed a batch to a task."""
    tasks: list[int] = []
    original = TurnSink._timed_flush

    async def timed_flush(self: TurnSink) -> None:
        tasks.append(self.seq)
        await original(self)

    monkeypatch.setattr(TurnSink, "_timed_flush", timed_flush)
    return tasks


async def test_a_windowed_batch_leaves_from_the_timer_without_a_task(user: Any, timer_tasks: list[int]) -> None:
    """The batch is written in the timer's own callback, the reply not awaited: no task per
    fragment. Order, sequence numbers and the stored state are as on the awaited path."""
    sink, layer, channel, redis = await pubsub_sink(user)
    await sink.step_started(0)
    for word in ["One ", "two ", "three ", "four"]:
        await sink.text(0, word)
    for word in [" five", " six"]:
        await asyncio.sleep(0.06)
        await sink.text(0, word)
    await asyncio.sleep(0.1)
    messages = [await asyncio.wait_for(layer.receive(channel), 2) for _ in range(5)]
    assert [m["seq"] for m in messages] == [1, 2, 3, 4, 5]
    # The text of each fragment (the first sets the rendered block, the rest append inside it).
    texts = [re.sub(r'<[^>"]*(?:"[^"]*"[^>"]*)*>', "", m["html"]) for m in messages[1:]]
    assert "".join(texts) == "One two three four five six"
    assert timer_tasks == []
    state = json.loads(await redis.get(live.key(sink.turn_id, "live")))
    assert state["seq"] == 5 and state["steps"][0]["text"] == "One two three four five six"
    await redis.aclose()


async def test_a_batch_due_while_another_flush_waits_leaves_after_it(user: Any, timer_tasks: list[int]) -> None:
    sink, layer, channel, redis = await pubsub_sink(user)
    await sink.step_started(0)
    await sink.text(0, "Lead")
    await sink.text(0, " and batch")
    async with sink._lock:  # an event's flush is waiting for Redis when the window ends
        await asyncio.sleep(0.06)
        assert timer_tasks == [2]
    await asyncio.sleep(0.05)
    messages = [await asyncio.wait_for(layer.receive(channel), 2) for _ in range(3)]
    assert [m["seq"] for m in messages] == [1, 2, 3] and " and batch" in messages[2]["html"]
    await redis.aclose()


async def test_a_batch_whose_reply_fails_is_logged_and_the_next_fragment_stores_the_state(
    user: Any, monkeypatch: Any, caplog: Any
) -> None:
    from core import redis_pipe

    sink, _, _, redis = await pubsub_sink(user)
    await sink.step_started(0)
    await sink.text(0, "Before")
    original = redis_pipe.RedisPipe.send_nowait

    def dropped(self: redis_pipe.RedisPipe, *args: Any) -> Any:
        reply = original(self, *args)
        assert self._protocol is not None
        self.drop(self._protocol, "Redis connection lost: reset by peer")  # before its reply came
        return reply

    monkeypatch.setattr(redis_pipe.RedisPipe, "send_nowait", dropped)
    await sink.text(0, " lost?")
    await asyncio.sleep(0.08)
    assert "A fragment was not published" in caplog.text
    monkeypatch.setattr(redis_pipe.RedisPipe, "send_nowait", original)
    await sink.assistant_message(0, AssistantMessage(content="Before lost? After"), "complete")
    state = json.loads(await redis.get(live.key(sink.turn_id, "live")))
    # The page sees the skipped number, asks for the state: it has all the text.
    assert state["seq"] == 4 and state["steps"][0]["text"] == "Before lost? After"
    await redis.aclose()


async def test_a_redis_refusing_the_script_on_the_timer_path_turns_it_off(user: Any, monkeypatch: Any) -> None:
    from chat import events

    sink, layer, _, redis = await pubsub_sink(user)
    await sink.step_started(0)
    await sink.text(0, "Lead")
    monkeypatch.setattr(events, "_STORE_AND_PUBLISH", "return redis.call('NO-SUCH-COMMAND')")
    try:
        await sink.text(0, " refused")
        await asyncio.sleep(0.08)
        assert not events._script.usable
        assert events.sender_nowait(layer) is None  # the awaited path from now on, as two commands
    finally:
        events._script.usable = True
    await redis.aclose()


async def test_arguments_being_written_redraw_only_cards_that_show_an_app(user: Any) -> None:
    # An app's card is redrawn with the input so far (tests/e2e/test_mcp_apps.py); any other
    # card waits for the whole call, so streaming arguments cost it nothing.
    sink, layer, channel, redis = await make_sink(user)
    await sink.step_started(0)
    await sink.tool_call_opened(0, 0, "c1", "toolset__clock_math__calculate")
    await drain(layer, channel)
    await sink.tool_arguments(0, 0, '{"expression": "1+')
    await sink.tool_arguments(0, 9, "{")  # a card that is not there: nothing either
    assert await drain(layer, channel) == []
    await redis.aclose()
