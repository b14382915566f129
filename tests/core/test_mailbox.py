"""The Redis mailbox (core/mailbox.py): items taken all at once, in order, by one reader — the
same through redis-py's client and through an event loop's pipelined connection."""

from __future__ import annotations

import asyncio

import redis
import redis.asyncio as aioredis
from django.conf import settings

from core import mailbox, redis_pipe

KEY = "tessera:test:mailbox"


def test_taking_on_the_pipelined_connection_empties_the_box_in_order() -> None:
    sync = redis.from_url(settings.REDIS_URL)
    sync.delete(KEY)
    for item in ("3", "1", "2"):
        mailbox.post(sync, KEY, item)

    async def go() -> tuple[list[str], list[str], list[str]]:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        try:
            taken = await mailbox.take_piped(pipe, KEY)
            again = await mailbox.take_piped(pipe, KEY)
            mailbox.post(sync, KEY, "4")
            client = aioredis.from_url(settings.REDIS_URL)
            by_redis_py = await mailbox.take(client, KEY)
            await client.aclose()
            return taken, again, by_redis_py
        finally:
            pipe.close()

    taken, again, by_redis_py = asyncio.run(go())
    assert taken == ["3", "1", "2"] and again == []
    assert by_redis_py == ["4"] and not sync.exists(KEY)


def test_concurrent_readers_each_item_taken_once() -> None:
    sync = redis.from_url(settings.REDIS_URL)
    sync.delete(KEY)
    for item in range(40):
        mailbox.post(sync, KEY, str(item))

    async def go() -> list[list[str]]:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        try:
            return list(await asyncio.gather(*(mailbox.take_piped(pipe, KEY) for _ in range(5))))
        finally:
            pipe.close()

    takes = asyncio.run(go())
    assert sorted((item for take in takes for item in take), key=int) == [str(i) for i in range(40)]
    assert sum(1 for take in takes if take) == 1  # the first look took them all
