"""Finds turns whose worker died and closes them as interrupted, without anyone loading a page.

Every worker process runs `run()` in its loop; a short Redis lock lets one of them do each
round. Each round also moves on the queues of the workers' fair share whose slots lapsed
(chat/worker/fair_share.py). A running turn keeps a heartbeat key alive while its worker lives (`chat.worker.loop.
TurnWatch`); a turn marked running in the database with no heartbeat, started longer ago than
the heartbeat lasts, belongs to a dead worker. Closing it pushes the new state to open tabs.
With a 10 s heartbeat and a 10 s round, an abandoned turn is closed within about 20 s.
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import timedelta
from typing import Any

from django.utils import timezone

from chat import live
from chat.models import Turn

from . import turn_queue
from .loop import db

log = logging.getLogger(__name__)
INTERVAL_S = 10.0
LOCK_KEY = "tessera:reaper"


def _suspects() -> list[Turn]:
    started_before = timezone.now() - timedelta(seconds=live.ALIVE_TTL_S)
    return list(
        Turn.objects.filter(status=Turn.Status.RUNNING, started_at__lt=started_before).only("id", "chat_id", "status")
    )


async def reap_once(redis: Any, *, interval_s: float = INTERVAL_S) -> list[int]:
    """One round; returns the ids of the turns it closed."""
    from .turns import interrupt

    # One worker per round: the lock lasts a little less than a round.
    if not await redis.set(LOCK_KEY, str(os.getpid()), nx=True, px=max(1, int(interval_s * 900))):
        return []
    # Queues whose slots lapsed (their turns' worker died, below or elsewhere) move on.
    await db(turn_queue.pump_all)()
    suspects = await db(_suspects)()
    if not suspects:
        return []
    beats = await redis.mget([live.key(turn.pk, "alive") for turn in suspects])
    closed = []
    for turn, beat in zip(suspects, beats, strict=True):
        if beat is None and await interrupt(turn, redis):
            log.warning("Turn %s lost its worker; marked interrupted", turn.pk)
            closed.append(turn.pk)
    return closed


async def run(redis: Any, interval_s: float = INTERVAL_S) -> None:
    while True:
        try:
            await reap_once(redis, interval_s=interval_s)
        except Exception:  # a database or Redis hiccup must not end the reaping for good
            log.warning("Looking for abandoned turns failed", exc_info=True)
        await asyncio.sleep(interval_s)
