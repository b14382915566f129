"""The circuit breaker counts failures across worker processes: two real Celery workers, a real
Exa (the fake server) answering 500, the demo model calling it."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pytest

from chat.models import Chat, Message, Turn
from chat.tasks import run_turn
from core.processes import worker_command
from toolsets.exa.fake_server import FAKE_API_KEY, FakeExa
from toolsets.models import PolicySettings, ToolExecution, ToolsetConfig, UserToolsetConfig
from toolsets.policy import breaker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
SCOPE = breaker.tool_scope("exa", "search")


def _wait_for_queue_consumer(queue: str, timeout: float = 60) -> None:
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replies = app.control.inspect(timeout=0.5).active_queues() or {}
        if any(q["name"] == queue for queues in replies.values() for q in queues):
            return
    raise RuntimeError(f"no worker consumed {queue} within {timeout} s")


def _turn(chat: Chat, text: str, queue: str | None) -> Turn:
    turn = Turn.objects.create(chat=chat, model=chat.model)
    Message.objects.create(chat=chat, turn=turn, role="user", content=text)
    if queue:
        run_turn.apply_async((turn.pk,), queue=queue)
    else:
        run_turn.delay(turn.pk)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        turn.refresh_from_db()
        if turn.status not in (Turn.Status.QUEUED, Turn.Status.RUNNING):
            return turn
        time.sleep(0.2)
    raise AssertionError(f"turn {turn.pk} did not finish")


def _search(turn: Turn) -> ToolExecution:
    return ToolExecution.objects.get(turn=turn, tool="search")


def test_breaker_opens_across_two_workers_and_a_probe_closes_it(stack: Any, user: Any, demo_model: Any) -> None:
    queue = f"second-{os.getpid()}"
    log = stack.logs / "second-worker.log"
    second = subprocess.Popen(
        [*worker_command(concurrency=2, hostname=f"second-{os.getpid()}@%h"), "-Q", queue],
        env=stack.env,
        stdout=open(log, "wb"),  # noqa: SIM115 - the child process owns it
        stderr=subprocess.STDOUT,
    )
    PolicySettings(breaker_failures=2, breaker_window_s=60, breaker_cooldown_s=3).save()
    try:
        _wait_for_queue_consumer(queue)
        with FakeExa() as exa:
            ToolsetConfig.objects.update_or_create(toolset_id="exa", defaults={"settings": {"base_url": exa.base_url}})
            UserToolsetConfig.objects.create(user=user, toolset_id="exa", api_key=FAKE_API_KEY)
            chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"exa": ["search"]})

            # One failure in each worker: together they open the breaker.
            first = _search(_turn(chat, "Search the web for [exa:500] django", None))
            assert first.error_type == "execution_error" and first.attempts == 3
            assert breaker.Breakers().states([(SCOPE, "exa", "search")])[0].state == breaker.CLOSED
            second_failure = _search(_turn(chat, "Search the web for [exa:500] channels", queue))
            assert second_failure.error_type == "execution_error"
            assert breaker.Breakers().states([(SCOPE, "exa", "search")])[0].state == breaker.OPEN

            # Now either worker fails fast, without calling Exa.
            asked = len(exa.requests)
            stopped_turn = _turn(chat, "Search the web for celery", None)
            stopped = _search(stopped_turn)
            assert stopped.error_type == "circuit_open" and stopped.attempts == 0
            assert "temporarily disabled after repeated failures" in stopped.error
            assert len(exa.requests) == asked
            tool_message = Message.objects.get(turn=stopped_turn, role="tool")
            assert tool_message.content.startswith("Error (circuit_open):")

            # After the cool-down, one probe goes through and its success closes the breaker.
            time.sleep(3.2)
            probe = _search(_turn(chat, "Search the web for redis", queue))
            assert probe.status == "success"
            assert breaker.Breakers().states([(SCOPE, "exa", "search")])[0].state == breaker.CLOSED
            after = _search(_turn(chat, "Search the web for daphne", None))
            assert after.status == "success"
    finally:
        PolicySettings(breaker_failures=5, breaker_window_s=60, breaker_cooldown_s=30).save()
        second.terminate()
        try:
            second.wait(timeout=15)
        except subprocess.TimeoutExpired:
            second.kill()
            second.wait()
    text = log.read_text(errors="replace")
    # The second worker saw the breaker open (its failure was the second) and the probe close it.
    assert f"Circuit breaker {SCOPE} → open" in text
    assert f"Circuit breaker {SCOPE} → half_open" in text and f"Circuit breaker {SCOPE} → closed" in text
    counts = breaker.transition_counts()
    assert counts[(SCOPE, "open")] == 1 and counts[(SCOPE, "closed")] == 1
