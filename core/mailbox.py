"""A mailbox in Redis: web processes post small items (ids), the one process running the work
takes them all at once, in the order they came. Used to hand guidance to a running turn at the
agent's next step (chat's steering); no app imports.

One list per box. `take` reads and empties it in one atomic step, so an item is taken by
exactly one reader, once. Boxes expire on their own: a box nobody drains (its worker died)
does not stay in Redis."""

from __future__ import annotations

from typing import Any

TTL_S = 3600
# More than anyone types into one running answer; past it a post is refused (the caller says so).
MAX_ITEMS = 50


class Full(Exception):
    """The box holds MAX_ITEMS already."""


def post(redis: Any, key: str, item: str) -> int:
    """Appends `item` (blocking client); returns how many the box holds now."""
    if redis.llen(key) >= MAX_ITEMS:
        raise Full(key)
    pipe = redis.pipeline(transaction=True)
    pipe.rpush(key, item)
    pipe.expire(key, TTL_S)
    count, _ = pipe.execute()
    return int(count)


async def take(redis: Any, key: str) -> list[str]:
    """Every item in the box, oldest first, and the box emptied (an async client)."""
    pipe = redis.pipeline(transaction=True)
    pipe.lrange(key, 0, -1)
    pipe.delete(key)
    items, _ = await pipe.execute()
    return _texts(items)


async def take_piped(pipe: Any, key: str) -> list[str]:
    """`take` on an event loop's pipelined connection (core.redis_pipe.RedisPipe): the same
    transaction, its commands written back to back, at a third of redis-py's CPU. A reader looks
    before every step of a turn, and almost always finds the box empty."""
    *_, (items, _) = await pipe.execute_many(("MULTI",), ("LRANGE", key, 0, -1), ("DEL", key), ("EXEC",))
    return _texts(items)


def _texts(items: list[Any]) -> list[str]:
    return [item.decode() if isinstance(item, bytes) else str(item) for item in items]


def take_sync(redis: Any, key: str) -> list[str]:
    """`take` with a blocking client."""
    pipe = redis.pipeline(transaction=True)
    pipe.lrange(key, 0, -1)
    pipe.delete(key)
    items, _ = pipe.execute()
    return _texts(items)
