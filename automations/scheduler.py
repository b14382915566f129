"""Starting the slots that came due: what each `automations.tick` (sent by Celery beat) does.

Exactly once per slot: a tick moves an automation's `next_slot` with a conditional UPDATE (from
the value it read to the next one) and creates the run row for the slot — unique per (automation,
slot) — in the same transaction as the run's chat and turn. Of two ticks racing (two beat
processes, two workers) one moves the mark; the other changes nothing and starts nothing.

Missed slots (nothing ran: downtime, a stopped beat): the latest missed slot runs once, and the
older ones are skipped (counted on that run as `skipped_slots`). A schedule paused and resumed
starts from the next slot after the resume, with no catch-up."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction

from . import runs
from .models import Automation, AutomationRun
from .schedule import ScheduleError, parse

log = logging.getLogger(__name__)


def schedule_of(automation: Automation):  # type: ignore[no-untyped-def]
    return parse(automation.schedule, automation.timezone, automation.created_at)


def first_slot(automation: Automation, now: datetime) -> datetime | None:
    """Where a new, edited or resumed schedule starts: its first slot after now."""
    if not automation.enabled or automation.trigger != Automation.Trigger.SCHEDULE:
        return None
    try:
        return schedule_of(automation).after(now)
    except ScheduleError:
        return None


def tick(now: datetime) -> list[int]:
    """Starts every due slot; returns the ids of the runs started."""
    started: list[int] = []
    due = Automation.objects.filter(
        enabled=True, trigger=Automation.Trigger.SCHEDULE, next_slot__isnull=False, next_slot__lte=now
    ).select_related("owner")
    for automation in due:
        try:
            run = _start_due(automation, now)
        except Exception:
            log.exception("Starting automation %s's slot failed", automation.pk)
            continue
        if run is not None:
            started.append(run.pk)
    return started


def _start_due(automation: Automation, now: datetime) -> AutomationRun | None:
    mark = automation.next_slot
    assert mark is not None
    try:
        schedule = schedule_of(automation)
    except ScheduleError as exc:
        log.warning("Automation %s has an unreadable schedule: %s", automation.pk, exc)
        Automation.objects.filter(pk=automation.pk, next_slot=mark).update(next_slot=None)
        return None
    slots = schedule.between(mark, now)
    with transaction.atomic():
        # The claim: only the tick that moves the mark from what it read goes on.
        if not Automation.objects.filter(pk=automation.pk, next_slot=mark).update(next_slot=schedule.after(now)):
            return None
        if not slots:
            return None
        try:
            with transaction.atomic():
                run = AutomationRun.objects.create(
                    automation=automation,
                    origin=AutomationRun.Origin.SCHEDULE,
                    slot=slots[-1],
                    skipped_slots=len(slots) - 1,
                )
        except IntegrityError:
            return None  # that slot has its run already
        runs.start(run)
    log.info("Automation %s: run %s for slot %s", automation.pk, run.pk, run.slot)
    return run
