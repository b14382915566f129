"""Growing delays after repeated failures, counted in Redis so every web process sees them.

A key (who failed, in some scope) gets a few failures free; each further failure doubles the
wait before the next attempt, up to a cap, and the count is forgotten after a quiet spell. The
caller decides what a key is (an account and an address, an address alone) and what a refused
attempt gets: this module only counts and answers "how long still". Used by the sign-in throttle
(accounts/throttle.py) and bearer-token authentication (hub/auth.py, hub/oauth.py).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

from core import ratelimit
from core.redis_client import sync_client

# Under the rate limits' prefix (tests clear it between tests).
PREFIX = f"{ratelimit.PREFIX}:backoff"


@dataclass(frozen=True)
class Policy:
    free: int  # failures before the first wait
    first_s: float  # the first wait; each further failure doubles it
    max_s: float  # the longest wait
    memory_s: int  # failures are forgotten after this long without another


def _keys(scope: str, who: str) -> tuple[str, str]:
    """The failure count's key and the key of when the next attempt is allowed."""
    # Hashed: a username or a header value is anything a client sends, of any length.
    key = f"{PREFIX}:{scope}:{hashlib.sha256(who.encode('utf-8', 'replace')).hexdigest()[:40]}"
    return f"{key}:n", f"{key}:until"


def _now() -> float:
    return time.time()


def delay_after(failures: int, policy: Policy) -> float:
    """The wait that `failures` failures impose: none while free, then first_s doubling to max_s."""
    if failures < policy.free:
        return 0.0
    return float(min(policy.max_s, policy.first_s * 2 ** min(failures - policy.free, 62)))


def wait(scope: str, who: str) -> int:
    """Seconds before `who` may try again in `scope` (0: now)."""
    until = sync_client().get(_keys(scope, who)[1])
    if until is None:
        return 0
    return max(0, math.ceil(float(until) - _now()))


def fail(scope: str, who: str, policy: Policy) -> int:
    """Counts a failure; returns the wait it imposes (0: none yet)."""
    count_key, until_key = _keys(scope, who)
    failures = ratelimit.hit(count_key, policy.memory_s)
    delay = delay_after(failures, policy)
    if delay:
        # Both outlive the wait, however long: the count must still be there when it is over.
        keep_s = max(policy.memory_s, math.ceil(delay))
        pipe = sync_client().pipeline(transaction=False)
        pipe.set(until_key, str(_now() + delay), ex=keep_s)
        pipe.expire(count_key, keep_s)
        pipe.execute()
    return math.ceil(delay)


def clear(scope: str, who: str) -> None:
    sync_client().delete(*_keys(scope, who))


# A refused request carries its wait and what it was refused for ("password", "token"); the
# sign-in throttle's middleware (accounts/throttle.py) answers it with a 429.
WAIT_ATTR = "throttle_wait_s"
REASON_ATTR = "throttle_reason"


def refuse(request: Any, wait_s: int, reason: str) -> None:
    setattr(request, WAIT_ATTR, max(int(wait_s), 1))
    setattr(request, REASON_ATTR, reason)


def refused(request: Any) -> int:
    """The wait a request was refused with (0: not refused)."""
    return int(getattr(request, WAIT_ATTR, 0) or 0)


def reason(request: Any) -> str:
    return str(getattr(request, REASON_ATTR, ""))
