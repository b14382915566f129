"""Per-user, per-tool call limits: a fixed one-minute window counted in Redis, so the limit
holds across every web and worker process."""

from __future__ import annotations

import time

from core.redis_client import sync_client

WINDOW_S = 60


def allow(user_id: int, key: str, per_minute: int) -> bool:
    """Counts this call; False when it goes over the limit (0 = unlimited)."""
    if per_minute <= 0:
        return True
    window = int(time.time() // WINDOW_S)
    redis_key = f"tessera:rl:{user_id}:{key}:{window}"
    pipe = sync_client().pipeline(transaction=False)
    pipe.incr(redis_key)
    pipe.expire(redis_key, WINDOW_S * 2)
    count, _ = pipe.execute()
    return int(count) <= per_minute
