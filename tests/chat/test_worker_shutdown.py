"""SIGTERM to a real worker: turns in flight finish within the grace period, longer ones end
interrupted with their partial answers, and nothing runs twice once a worker is back."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat.live import LiveTurn
from chat.models import Chat, LLMModel, Message, Turn
from chat.worker.turn_store import INTERRUPTED_ERROR
from demo import answers
from tests.processes import BOOT_S, Processes, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

GRACE_S = 5.0


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    processes.env.update(
        {"TESSERA_WORKER_SHUTDOWN_GRACE_S": str(GRACE_S), "LOG_FORMAT": "json", "TESSERA_HEALTH_WORKER_FRESH_S": "6"}
    )
    processes.start_redis()
    yield processes
    processes.close()


def _model(name: str, tokens_per_second: float) -> LLMModel:
    return LLMModel.objects.create(
        name=name, model="demo/tessera", enabled=True, extra_params={"tokens_per_second": tokens_per_second}
    )


def _turn(user: Any, model: LLMModel) -> Turn:
    chat = Chat.objects.create(owner=user, model=model, enabled_tools={})
    turn = Turn.objects.create(chat=chat, model=model)
    Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content="[demo:slow] take your time")
    return turn


def _streaming(own: Processes, turn: Turn) -> bool:
    """The worker has claimed the turn and streamed some of its answer."""
    client = own.client()
    try:
        raw = client.get(f"tessera:turn:{turn.pk}:live")
    finally:
        client.close()
    state = LiveTurn.from_json(raw) if raw else None
    return bool(state and state.steps and state.steps[0].text)


def _records(log: Path) -> list[dict[str, Any]]:
    """The worker's log records (standard error, one JSON object per line)."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def test_sigterm_finishes_short_turns_interrupts_long_ones_and_runs_nothing_twice(
    own: Processes, user: Any, demo_model: Any
) -> None:
    full = answers.SLOW_TEXT
    short = _turn(user, _model("Quick", 250))  # ~1.5 s of streaming: well inside the grace period
    long = _turn(user, _model("Slow", 12))  # ~30 s: far beyond it
    worker = own.worker()
    wait_until(own.worker_alive, BOOT_S, "the worker did not start")
    broker = own.broker()
    for turn in (short, long):
        broker.send_task("chat.run_turn", args=[turn.pk])
    wait_until(lambda: _streaming(own, short) and _streaming(own, long), 30, "the turns did not start streaming")

    signalled = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    # It stops taking turns at once: a turn sent now waits for the next worker.
    late = _turn(user, demo_model)
    broker.send_task("chat.run_turn", args=[late.pk])
    code = worker.wait(timeout=GRACE_S + 30)
    took = time.monotonic() - signalled
    assert code == 0
    assert GRACE_S - 0.5 < took < GRACE_S + 15, took

    short.refresh_from_db()
    assert short.status == Turn.Status.COMPLETED, (short.status, short.error)
    answer = Message.objects.get(turn=short, role=Message.Role.ASSISTANT)
    assert answer.content.strip() == full.strip()

    long.refresh_from_db()
    assert long.status == Turn.Status.INTERRUPTED
    assert long.error == INTERRUPTED_ERROR and long.error_kind == "interrupted"
    partial = Message.objects.get(turn=long, role=Message.Role.ASSISTANT)
    assert partial.content and len(partial.content) < len(full.strip())
    assert full.startswith(partial.content)
    assert partial.metadata.get("stopped") is True

    late.refresh_from_db()
    assert late.status == Turn.Status.QUEUED

    # A new worker: the late turn runs; the two finished ones are not run again.
    own.worker(name="worker-after")
    wait_until(lambda: Turn.objects.get(pk=late.pk).status == Turn.Status.COMPLETED, 60, "the late turn did not run")
    time.sleep(2)
    client = own.client()
    try:
        assert client.llen("celery") == 0 and client.hlen("unacked") == 0
    finally:
        client.close()
    for turn, status in ((short, Turn.Status.COMPLETED), (long, Turn.Status.INTERRUPTED)):
        turn.refresh_from_db()
        assert turn.status == status
        assert Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).count() == 1
    records = _records(own.log("worker")) + _records(own.log("worker-after"))
    started = [r["turn_id"] for r in records if r["message"] == "Turn started"]
    assert sorted(started) == sorted([short.pk, long.pk, late.pk])
