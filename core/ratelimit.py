"""Attempts counted in Redis, so a limit holds across every web and worker process.

`allow` is a fixed-window limiter: at most `limit` attempts by one caller (`who`) in one
`scope` per window of `window_s` seconds, the window starting on a multiple of `window_s`.
Its callers differ only in those parameters: sign-ups and OAuth client registrations per
client address an hour (chat/accounts, chat/api), tool calls and uploads per user a minute
(toolsets/policy/gate.py, toolsets/files/views.py). `hit` is the counting underneath, also
used by the growing delays after failed sign-ins and tokens (core/backoff.py).
"""

from __future__ import annotations

import time

from core.redis_client import sync_client

# Every rate-limit key lives under this prefix (tests clear it between tests).
PREFIX = "tessera:rl"


def hit(key: str, ttl_s: int) -> int:
    """Adds one to `key`'s count and keeps it `ttl_s` seconds from now; returns the count."""
    pipe = sync_client().pipeline(transaction=False)
    pipe.incr(key)
    pipe.expire(key, ttl_s)
    count, _ = pipe.execute()
    return int(count)


def allow(scope: str, who: str | int, limit: int, *, window_s: int, zero_is_unlimited: bool = False) -> bool:
    """Counts this attempt; False once `who` went over `limit` in the current window.

    A limit of 0 refuses everything, unless `zero_is_unlimited` (then nothing is counted): the
    per-user limits an admin sets use 0 for "no limit"."""
    if zero_is_unlimited and limit <= 0:
        return True
    window = int(time.time() // window_s)
    # Twice the window: the key outlives its window however late in it the last attempt came.
    return hit(f"{PREFIX}:{scope}:{who}:{window}", window_s * 2) <= limit
