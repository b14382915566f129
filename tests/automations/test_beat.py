"""Real Celery beat and worker processes (their own Redis, the test's database): a per-minute
automation runs at each of its minutes — time moved through the scheduler's clock file, never
waited for — once each with two beat processes (one holds RedBeat's lock, the other stands by
and takes over when the first is killed); a slot missed while no beat ran follows the policy
(the latest runs once, older ones skipped); a worker killed mid-run leaves one retry and no
duplicate."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from automations import scheduler
from automations.models import Automation, AutomationLimits, AutomationRun
from chat.models import LLMModel, Message, Turn
from core.processes import beat_command
from tests.processes import Processes, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

T0 = datetime(2026, 11, 28, 10, 0, 30, tzinfo=UTC)


class Clock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(T0)

    def set(self, moment: datetime) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(moment.isoformat())
        tmp.replace(self.path)  # a reader never sees half a time


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Processes, Clock, dict[str, str]]]:
    processes = Processes(tmp_path / "procs")
    processes.start_redis()
    clock = Clock(tmp_path / "clock")
    env = {
        "TESSERA_AUTOMATIONS_CLOCK_FILE": str(clock.path),
        "AUTOMATIONS_TICK_S": "0.5",
        # A killed beat's lock outlives it this long before the standby takes over.
        "TESSERA_BEAT_LOCK_TIMEOUT_S": "3",
    }
    try:
        yield processes, clock, env
    finally:
        processes.close()


def _automation(user: Any, model: LLMModel, prompt: str = "Summarize stale tasks") -> Automation:
    AutomationLimits.objects.update_or_create(pk=1, defaults={"min_interval_minutes": 1})
    a = Automation.objects.create(owner=user, name="Minutely", prompt=prompt, model=model, schedule="* * * * *")
    a.next_slot = scheduler.first_slot(a, T0)
    a.save()
    return a


def _runs(a: Automation) -> list[tuple[int, str, int, int]]:
    return [
        (r.slot.minute if r.slot else -1, r.status, r.skipped_slots, r.attempts)
        for r in AutomationRun.objects.filter(automation=a).order_by("slot")
    ]


def _settled(a: Automation, count: int) -> list[tuple[int, str, int, int]] | None:
    runs = _runs(a)
    return runs if len(runs) == count and all(status in ("completed", "failed") for _, status, _, _ in runs) else None


def test_minutes_run_once_each_with_two_beats_and_missed_slots_follow_the_policy(
    stack: tuple[Processes, Clock, dict[str, str]], user: Any, demo_model: LLMModel
) -> None:
    processes, clock, env = stack
    a = _automation(user, demo_model)
    processes.worker(concurrency=4, **env)
    beats = [processes.spawn(beat_command(), f"beat-{i}", **env) for i in range(2)]
    wait_until(processes.worker_alive, 240, "the worker did not start")
    holders = wait_until(lambda: _holders(processes, 2), 120, "no beat took the lock")
    time.sleep(2)  # the beat with the lock ticking at the clock's 10:00:30: nothing is due
    assert _runs(a) == []
    assert _holders(processes, 2) == holders and len(holders) == 1  # the other one stands by

    clock.set(T0 + timedelta(minutes=1))
    wait_until(lambda: _settled(a, 1), 180, "the 10:01 run did not finish")
    clock.set(T0 + timedelta(minutes=2))
    wait_until(lambda: _settled(a, 2), 180, "the 10:02 run did not finish")
    time.sleep(3)  # a few more ticks at 10:02:30
    assert _runs(a) == [(1, "completed", 0, 1), (2, "completed", 0, 1)]
    assert all(Turn.objects.filter(chat=r.chat).count() == 1 for r in AutomationRun.objects.all())

    # The beat with the lock dies without a word: the standby takes over once the lock runs out.
    active, standby = beats[holders[0]], beats[1 - holders[0]]
    active.send_signal(signal.SIGKILL)
    active.wait(timeout=10)
    clock.set(T0 + timedelta(minutes=3))
    wait_until(lambda: _settled(a, 3), 180, "the standby beat did not take over")
    assert _holders(processes, 2) == [0, 1]
    assert _runs(a)[-1] == (3, "completed", 0, 1)

    # Downtime: no beat while the clock passes five slots; then one beat comes back.
    standby.send_signal(signal.SIGTERM)
    standby.wait(timeout=30)
    clock.set(T0 + timedelta(minutes=8))
    time.sleep(2)
    assert len(_runs(a)) == 3
    processes.spawn(beat_command(), "beat-again", **env)
    wait_until(lambda: _settled(a, 4), 180, "the missed slot did not run")
    time.sleep(2)
    assert _runs(a)[-1] == (8, "completed", 4, 1) and len(_runs(a)) == 4
    a.refresh_from_db()
    assert a.next_slot == datetime(2026, 11, 28, 10, 9, tzinfo=UTC)


def _holders(processes: Processes, count: int) -> list[int]:
    """Which of beat-0 … beat-<count-1> have held RedBeat's lock, by their logs."""
    return [i for i in range(count) if "Acquired lock" in processes.log(f"beat-{i}").read_text(errors="replace")]


def test_a_worker_killed_mid_run_gives_one_retry_and_no_duplicate(
    stack: tuple[Processes, Clock, dict[str, str]], user: Any
) -> None:
    processes, clock, env = stack
    slow = LLMModel.objects.create(
        name="Demo at 40 tokens/s", model="demo/tessera", enabled=True, extra_params={"tokens_per_second": 40}
    )
    a = _automation(user, slow, prompt="Tell me a long story [demo:slow]")
    doomed = processes.worker("doomed", concurrency=4, **env)
    processes.spawn(beat_command(), "beat", **env)
    wait_until(processes.worker_alive, 240, "the worker did not start")
    clock.set(T0 + timedelta(minutes=1))

    def streaming() -> bool:
        run = AutomationRun.objects.filter(automation=a).first()
        if run is None:
            return False
        turn_id = run.turn_id
        if turn_id is None:
            return False
        running = Turn.objects.filter(pk=turn_id, status="running").exists()
        if running and Message.objects.filter(turn_id=turn_id, role="assistant").exists():
            return True
        if run.status == "running":
            time.sleep(2)  # running, its first words on their way: give them a moment
            return True
        return False

    wait_until(streaming, 180, "the run did not start streaming")
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    first = AutomationRun.objects.get(automation=a).turn_id
    assert first is not None
    processes.worker("survivor", concurrency=4, **env)
    # The survivor's reaper closes the dead worker's turn as interrupted; the run is retried once.
    wait_until(lambda: _settled(a, 1), 240, "the run was not retried to its end")
    run = AutomationRun.objects.get(automation=a)
    assert (run.status, run.attempts) == ("completed", 2), run.error
    assert Turn.objects.get(pk=first).status == "interrupted"
    assert list(Turn.objects.filter(chat=run.chat).values_list("status", flat=True)) == ["interrupted", "completed"]
    assert AutomationRun.objects.count() == 1
