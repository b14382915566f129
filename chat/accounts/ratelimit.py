"""Sign-up attempts per client address: a fixed one-hour window counted in Redis, so the limit
holds across every web process."""

from __future__ import annotations

import time

from core.http import client_address
from core.redis_client import sync_client

__all__ = ["allow", "client_address"]

WINDOW_S = 3600


def allow(scope: str, who: str, per_hour: int) -> bool:
    """Counts this attempt; False once `who` went over `per_hour` in the current hour."""
    window = int(time.time() // WINDOW_S)
    key = f"tessera:rl:{scope}:{who}:{window}"
    pipe = sync_client().pipeline(transaction=False)
    pipe.incr(key)
    pipe.expire(key, WINDOW_S * 2)
    count, _ = pipe.execute()
    return int(count) <= per_hour
