"""The running agent's inbox (agent.control.Inbox): the person's guidance, posted to the turn's
Redis mailbox by the Steer view (chat/pending.py) and read before each model call. An empty
look is one Redis round trip; the database is touched only when something came."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError

from chat import pending
from core import mailbox, redis_pipe

from .loop import db

log = logging.getLogger(__name__)


class TurnInbox:
    def __init__(self, chat_id: int, turn_id: int, redis: Any) -> None:
        self.chat_id, self.turn_id, self.redis = chat_id, turn_id, redis
        self.key = pending.mailbox_key(turn_id)

    async def take(self, step: int) -> list[str]:
        ids = await self._look()
        if not ids:
            return []
        texts: list[str] = await db(pending.take_steers)(self.chat_id, self.turn_id, step, ids)
        return texts

    async def _look(self) -> list[str]:
        # On the loop's pipelined connection when it has one (two looks a turn at least).
        pipe = redis_pipe.for_loop(settings.REDIS_URL)
        if pipe is not None:
            try:
                return await mailbox.take_piped(pipe, self.key)
            except RedisConnectionError:
                # Redis drops a transaction whose connection is lost before EXEC; the rows stay
                # the truth whatever was lost (chat/pending.py). redis-py's client retries.
                log.warning("Looking for guidance on the pipelined Redis connection failed", exc_info=True)
        return await mailbox.take(self.redis, self.key)
