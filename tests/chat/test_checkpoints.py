"""A streaming answer's text saved as it grows (chat/worker/checkpoints.py): not before its time,
sooner once a block finished, only what changed, and again after a failed write."""

from __future__ import annotations

from typing import Any

import pytest

from chat.live import LiveTurn
from chat.models import Chat, Message, Turn
from chat.worker import checkpoints, turn_store
from chat.worker.checkpoints import Checkpoints

pytestmark = pytest.mark.django_db(transaction=True)


async def running(user: Any) -> tuple[Checkpoints, LiveTurn]:
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    state = LiveTurn(turn.pk, chat.pk)
    return Checkpoints(state, chat.pk, turn.pk), state


async def saved(state: LiveTurn) -> list[tuple[int | None, str]]:
    rows = Message.objects.filter(turn_id=state.id, role=Message.Role.ASSISTANT).order_by("step")
    return [(m.step, m.content) async for m in rows]


async def test_text_is_saved_once_its_interval_passed_and_only_when_it_changed(user: Any, monkeypatch: Any) -> None:
    saves, state = await running(user)
    state.start_step(0).text = "Hel"
    saves.maybe()  # too soon after the start
    await saves.done()
    assert await saved(state) == []

    monkeypatch.setattr(checkpoints, "CHECKPOINT_S", 0.0)
    saves.maybe()
    await saves.done()
    assert await saved(state) == [(0, "Hel")]
    assert saves.saved == {("", 0): "Hel"}

    writes: list[Any] = []
    monkeypatch.setattr(turn_store, "checkpoint", lambda *args: writes.append(args))
    saves.maybe()  # nothing new
    await saves.done()
    assert writes == []


async def test_a_finished_block_is_saved_after_the_shorter_interval(user: Any, monkeypatch: Any) -> None:
    saves, state = await running(user)
    state.start_step(0).text = "A paragraph.\n\n"
    monkeypatch.setattr(checkpoints, "CHECKPOINT_MIN_S", 0.0)
    saves.maybe()
    await saves.done()
    assert await saved(state) == []  # no block finished: the long interval holds

    saves.block_finished = True
    saves.maybe()
    await saves.done()
    assert await saved(state) == [(0, "A paragraph.\n\n")]
    assert saves.block_finished is False


async def test_a_failed_write_is_tried_again_by_the_next_checkpoint(user: Any, monkeypatch: Any) -> None:
    saves, state = await running(user)
    state.start_step(0).text = "Kept"
    monkeypatch.setattr(checkpoints, "CHECKPOINT_S", 0.0)
    original = turn_store.checkpoint

    def broken(*args: Any) -> None:
        raise ConnectionError("database gone")

    monkeypatch.setattr(turn_store, "checkpoint", broken)
    saves.maybe()
    await saves.done()
    assert saves.saved == {}

    monkeypatch.setattr(turn_store, "checkpoint", original)
    saves.maybe()
    await saves.done()
    assert await saved(state) == [(0, "Kept")]
