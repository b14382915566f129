from __future__ import annotations

from celery import shared_task

from . import clock, scheduler


@shared_task(name="automations.tick", ignore_result=True)
def tick() -> None:
    """Sent by the beat process every AUTOMATIONS_TICK_S: starts the slots that came due."""
    scheduler.tick(clock.now())
