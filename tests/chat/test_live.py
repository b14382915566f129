"""A running turn's live state (chat/live.py): changed through LiveTurn's methods, serialised
whole, and published state first, then the fragment, with consecutive sequence numbers."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from chat import live
from chat.events import group_name
from chat.live import LiveStep, LiveTurn

CHAT_ID = 7
TURN_ID = 4242


@pytest.fixture
async def redis() -> AsyncIterator[Any]:
    client = live.async_client()
    yield client
    await client.aclose()


async def listen(layer: InMemoryChannelLayer, chat_id: int = CHAT_ID) -> str:
    channel = await layer.new_channel()
    await layer.group_add(group_name(chat_id), channel)
    return channel


async def received(layer: InMemoryChannelLayer, channel: str) -> list[dict[str, Any]]:
    messages = []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), 0.05))
        except TimeoutError:
            return messages


# --- changes ------------------------------------------------------------------------------------


def test_a_started_step_streams_until_it_ends() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0).text = "Hel"

    assert [(s.index, s.state) for s in turn.steps] == [(0, "streaming")]
    assert turn.streaming_texts() and list(turn.streaming_texts().values()) == ["Hel"]

    ended = turn.end_step(0, "Hello.", "complete")

    assert ended is turn.step(0)
    assert (ended.text, ended.state) == ("Hello.", "complete")
    assert turn.streaming_texts() == {}


def test_a_step_that_did_not_complete_loses_its_cards() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID)
    for index in (0, 1):
        turn.start_step(index).cards.append({"dom_id": f"card-{index}", "status": "pending"})

    turn.end_step(0, "Calling.", "complete")
    turn.end_step(1, "Cut", "stopped")

    assert [len(s.cards) for s in turn.steps] == [1, 0]  # calls cut off mid-stream never ran


def test_an_unknown_step_is_a_key_error() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0)
    with pytest.raises(KeyError):
        turn.end_step(3, "", "complete")


def test_only_steps_with_streamed_text_are_checkpointed() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0).text = "done"
    turn.end_step(0, "done", "complete")
    turn.start_step(1)  # nothing streamed yet
    turn.start_step(2).text = "half"

    assert list(turn.streaming_texts().values()) == ["half"]


def test_interrupting_stops_what_was_streaming_and_keeps_the_rest() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0)
    turn.end_step(0, "First answer.", "complete")
    turn.start_step(1).text = "Second ans"

    turn.interrupt("The worker stopped.")

    assert (turn.status, turn.error) == ("interrupted", "The worker stopped.")
    assert [(s.text, s.state) for s in turn.steps] == [("First answer.", "complete"), ("Second ans", "stopped")]


def test_finish_records_the_outcome() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.finish("completed", finish_reason="length", usage={"prompt_tokens": 3, "completion_tokens": 4})

    assert (turn.status, turn.error, turn.finish_reason) == ("completed", "", "length")
    assert turn.usage == {"prompt_tokens": 3, "completion_tokens": 4}


# --- serialisation ------------------------------------------------------------------------------


def test_the_state_survives_a_json_round_trip() -> None:
    turn = LiveTurn(TURN_ID, CHAT_ID, seq=5, notices=["Tool limit reached"], error="", finish_reason="stop")
    turn.start_step(0).cards.append({"dom_id": "card-1-0-0", "status": "success", "progress_percent": None})
    turn.end_step(0, "Looked it up.", "complete").usage = [120, 33]
    turn.start_step(1).text = "Then — ünïcode"
    turn.usage = {"prompt_tokens": 120, "completion_tokens": 33}

    back = LiveTurn.from_json(turn.to_json())

    assert back == turn
    assert all(isinstance(step, LiveStep) for step in back.steps)
    assert LiveTurn.from_json(turn.to_json().decode()) == turn  # as a decoding Redis client returns it


def test_a_card_orjson_cannot_write_still_round_trips() -> None:
    """A tool's result may hold what orjson refuses (an integer over 64 bits, a non-string key):
    the state is still stored, through the standard library."""
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0).cards.append({"result": {"big": 2**70 + 1, 3: "three"}})

    back = LiveTurn.from_json(turn.to_json())

    assert back.steps[0].cards[0]["result"] == {"big": 2**70 + 1, "3": "three"}


# --- storage and publishing ---------------------------------------------------------------------


async def test_nothing_stored_loads_as_none(redis: Any) -> None:
    assert await LiveTurn.aload(redis, TURN_ID) is None
    assert LiveTurn.load(TURN_ID) is None


async def test_publish_stores_the_state_before_the_fragment_is_sent(redis: Any) -> None:
    stored_when_sent: list[LiveTurn | None] = []

    class WatchingLayer(InMemoryChannelLayer):
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            # What a page (re)connecting at this moment would be shown.
            stored_when_sent.append(await LiveTurn.aload(redis, TURN_ID))
            await super().group_send(group, message)

    layer = WatchingLayer()
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0).text = "Hello"

    await turn.publish(redis, "<p>Hello</p>", layer)

    assert stored_when_sent == [turn]
    assert stored_when_sent[0] is not None and stored_when_sent[0].seq == 1


async def test_fragments_are_numbered_consecutively_with_the_stored_state(redis: Any) -> None:
    layer = InMemoryChannelLayer()
    channel = await listen(layer)
    turn = LiveTurn(TURN_ID, CHAT_ID)

    for n in range(3):
        await turn.publish(redis, f"<p>{n}</p>", layer)
    await turn.publish(redis, lambda state: f"<p>seq {state.seq}</p>", layer, full=True)

    messages = await received(layer, channel)
    assert [(m["type"], m["turn"], m["seq"]) for m in messages] == [("chat.fragment", TURN_ID, n) for n in (1, 2, 3, 4)]
    assert [m["html"] for m in messages] == ["<p>0</p>", "<p>1</p>", "<p>2</p>", "<p>seq 4</p>"]
    assert [m.get("full", False) for m in messages] == [False, False, False, True]
    stored = await LiveTurn.aload(redis, TURN_ID)
    assert stored is not None and stored.seq == 4
    assert LiveTurn.load(TURN_ID) == stored


async def test_a_fragment_goes_only_to_its_own_chat(redis: Any) -> None:
    layer = InMemoryChannelLayer()
    mine, other = await listen(layer, CHAT_ID), await listen(layer, CHAT_ID + 1)

    await LiveTurn(TURN_ID, CHAT_ID).publish(redis, "<p>x</p>", layer)

    assert len(await received(layer, mine)) == 1
    assert await received(layer, other) == []


async def test_the_stored_state_expires(redis: Any) -> None:
    await LiveTurn(TURN_ID, CHAT_ID).store(redis)

    ttl = await redis.ttl(live.key(TURN_ID, "live"))
    assert 0 < ttl <= live.LIVE_TTL_S


def test_stop_and_heartbeat_keys() -> None:
    client = live.sync_client()
    assert not live.is_alive(TURN_ID)
    client.set(live.key(TURN_ID, "alive"), "1", ex=live.ALIVE_TTL_S)
    assert live.is_alive(TURN_ID)

    live.request_cancel(TURN_ID)

    assert client.get(live.key(TURN_ID, "cancel")) == b"1"
    assert 0 < client.ttl(live.key(TURN_ID, "cancel")) <= live.LIVE_TTL_S


def test_an_interrupted_turn_leaves_its_approval_card_stopped() -> None:
    turn = LiveTurn(1, 1)
    step = turn.start_step(0)
    step.cards = [{"status": "waiting", "approval": {"id": "abc"}}, {"status": "success", "approval": None}]
    turn.interrupt("The worker stopped.")
    assert step.cards[0] == {"status": "cancelled", "approval": None}
    assert step.cards[1]["status"] == "success"


# --- a card read back from the stored state ------------------------------------------------------


def test_a_card_with_an_image_renders_the_same_after_the_state_is_read_back(db: Any) -> None:
    # A page that syncs mid-turn (a reconnect, a missed fragment) renders the turn from the
    # stored state: an image a tool returned must be there as in the pushed card.
    from chat.presenters import card, card_fragment
    from tests.toolsets.mcp.server import PIXEL

    data = base64.b64encode(PIXEL).decode()
    result = {"content": [{"type": "image", "mimeType": "image/png", "data": data}]}
    turn = LiveTurn(TURN_ID, CHAT_ID)
    turn.start_step(0).cards = [
        card(TURN_ID, 0, 0, name="toolset__mcp_t1__picture", status="success", result=result, duration_ms=5)
    ]
    pushed = card_fragment(turn.step(0).cards[0])
    again = LiveTurn.from_json(turn.to_json())
    reloaded = card_fragment(again.step(0).cards[0])
    assert '<img class="tc-image"' in pushed
    assert reloaded == pushed
