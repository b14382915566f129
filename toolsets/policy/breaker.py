"""Circuit breakers: a tool that keeps failing is not called for a while.

One breaker per tool, and one per MCP server (`Toolset.shared_breaker`), kept in Redis so all
worker processes count together. Only failures that are the tool's fault count (timeouts,
execution errors such as a 5xx or a lost connection; never validation errors, a user's missing
key or a rate limit): see `executor.ToolError.tool_fault`.

    closed ──N failures within the window──▶ open ──cool-down over──▶ half-open (one probe call)
      ▲                                        ▲                         │
      └──────────── the probe succeeded ───────┼─────────────────────────┘
                                               └──── the probe failed ───┘

While open (and while the probe runs) calls fail at once with `circuit_open`. Each change is
done by a Lua script, so two workers can never both let a probe through, and is logged and
counted (`transition_counts`). The clock is a parameter: tests drive the state machine with a
fake one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "tessera:policy:breaker"
TRANSITIONS_KEY = f"{PREFIX}:transitions"
CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
LABELS = {CLOSED: "Closed", OPEN: "Open", HALF_OPEN: "Half-open"}

# KEYS: the state hashes of the call's scopes. ARGV: now, cool-down, probe lease, claim (1/0).
# Returns {allowed, retry_after, probe scopes…}. Nothing changes unless every scope allows the
# call, so a rejected call never holds a probe lease; without `claim` nothing changes at all.
_ALLOW = """
local now, cooldown, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local wait, probes = 0, {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HGET', key, 'state')
  if state == 'open' then
    local ready = tonumber(redis.call('HGET', key, 'opened_at')) + cooldown
    if now < ready then wait = math.max(wait, ready - now) else table.insert(probes, i) end
  elseif state == 'half_open' then
    local leased = tonumber(redis.call('HGET', key, 'probe_until') or '0')
    if now < leased then wait = math.max(wait, leased - now) else table.insert(probes, i) end
  end
end
if wait > 0 then return {0, tostring(wait)} end
local result = {1, '0'}
if ARGV[4] ~= '1' then return result end
for _, i in ipairs(probes) do
  redis.call('HSET', KEYS[i], 'state', 'half_open', 'probe_until', tostring(now + lease))
  table.insert(result, KEYS[i])
end
return result
"""

# KEYS: the state hash then the failure set of each scope, in pairs. ARGV: now, ok (1/0),
# threshold, window, then the state keys this call held a probe lease on.
# Returns the transitions as {state key, new state, …}.
_RECORD = """
local now, ok, threshold, window = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3]), tonumber(ARGV[4])
local probes = {}
for i = 5, #ARGV do probes[ARGV[i]] = true end
local changes = {}
for i = 1, #KEYS, 2 do
  local key, fails = KEYS[i], KEYS[i + 1]
  local state = redis.call('HGET', key, 'state') or 'closed'
  if state == 'half_open' and probes[key] then
    if ok then
      redis.call('DEL', key, fails)
      table.insert(changes, key); table.insert(changes, 'closed')
    else
      redis.call('HSET', key, 'state', 'open', 'opened_at', tostring(now), 'probe_until', '0')
      table.insert(changes, key); table.insert(changes, 'open')
    end
  elseif state == 'closed' and not ok then
    redis.call('ZADD', fails, now, tostring(now) .. ':' .. redis.call('INCR', key .. ':n'))
    redis.call('ZREMRANGEBYSCORE', fails, '-inf', now - window)
    redis.call('EXPIRE', fails, math.ceil(window) + 1)
    redis.call('EXPIRE', key .. ':n', math.ceil(window) + 1)
    if redis.call('ZCARD', fails) >= threshold then
      redis.call('HSET', key, 'state', 'open', 'opened_at', tostring(now), 'probe_until', '0')
      redis.call('DEL', fails)
      table.insert(changes, key); table.insert(changes, 'open')
    end
  end
end
return changes
"""


def tool_scope(toolset_id: str, tool: str) -> str:
    return f"tool:{toolset_id}.{tool}"


def server_scope(toolset_id: str) -> str:
    return f"toolset:{toolset_id}"


def scopes_for(toolset: Any, tool: Any) -> list[str]:
    """The breakers one call of `tool` answers to."""
    scopes = [tool_scope(toolset.id, tool.name)]
    if getattr(toolset, "shared_breaker", False):
        scopes.append(server_scope(toolset.id))
    return scopes


def _state_key(scope: str) -> str:
    return f"{PREFIX}:{scope}"


def _fails_key(scope: str) -> str:
    return f"{PREFIX}:{scope}:fails"


def _scope_of(key: str) -> str:
    return key.removeprefix(PREFIX + ":")


@dataclass(frozen=True)
class Limits:
    failures: int = 5
    window_s: float = 60.0
    cooldown_s: float = 30.0

    @classmethod
    def current(cls) -> Limits:
        from ..models import PolicySettings

        found = PolicySettings.load()
        return cls(max(1, found.breaker_failures), max(1, found.breaker_window_s), max(1, found.breaker_cooldown_s))


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after_s: float = 0.0
    probes: tuple[str, ...] = ()  # state keys this call holds the probe lease of

    def message(self, name: str, now: float) -> str:
        at = datetime.fromtimestamp(now + self.retry_after_s, UTC).strftime("%H:%M:%S UTC")
        wait = max(1, round(self.retry_after_s))
        return (
            f"{name} is temporarily disabled after repeated failures; retry after {at} (in {wait} s). "
            "Do not call it again before then."
        )


@dataclass(frozen=True)
class BreakerState:
    scope: str
    toolset_id: str
    tool: str  # "" for a whole toolset's (an MCP server's) breaker
    state: str
    failures: int
    opened_at: datetime | None
    retry_at: datetime | None

    @property
    def label(self) -> str:
        return LABELS.get(self.state, self.state)


class Breakers:
    """The breakers, on a synchronous Redis client (the executor calls them from its database
    thread hop, the admin from a view)."""

    def __init__(
        self, redis: Any = None, *, clock: Callable[[], float] = time.time, limits: Limits | None = None
    ) -> None:
        if redis is None:
            from core.redis_client import sync_client

            redis = sync_client()
        self.redis = redis
        self.clock = clock
        self._limits = limits
        self._allow = redis.register_script(_ALLOW)
        self._record = redis.register_script(_RECORD)

    @property
    def limits(self) -> Limits:
        return self._limits or Limits.current()

    def allow(self, scopes: Sequence[str], *, lease_s: float, claim: bool = True) -> Verdict:
        """May a call go ahead? An open breaker past its cool-down lets this one call through
        as its probe, for at most `lease_s` (a probe whose worker died frees the lease then).
        `claim=False` only looks (before asking the user about a call that could not run)."""
        keys = [_state_key(s) for s in scopes]
        reply = self._allow(keys=keys, args=[self.clock(), self.limits.cooldown_s, lease_s, "1" if claim else "0"])
        allowed, wait, *probes = reply
        verdict = Verdict(bool(int(allowed)), float(wait), tuple(_text(p) for p in probes))
        for key in verdict.probes:
            self._transition(key, HALF_OPEN)
        return verdict

    def record(self, scopes: Sequence[str], *, ok: bool, probes: Iterable[str] = ()) -> list[tuple[str, str]]:
        """Reports how a call ended. `ok`: it succeeded, or failed through no fault of the tool
        (it then only settles a probe). Returns the transitions it caused."""
        keys = [k for s in scopes for k in (_state_key(s), _fails_key(s))]
        limits = self.limits
        args = [self.clock(), "1" if ok else "0", limits.failures, limits.window_s, *probes]
        reply = [_text(part) for part in self._record(keys=keys, args=args)]
        changes = list(zip(reply[::2], reply[1::2], strict=True))
        for key, state in changes:
            self._transition(key, state)
        return [(_scope_of(key), state) for key, state in changes]

    def release(self, probes: Iterable[str]) -> None:
        """A probe that never ran (the user denied it, Stop): the next call may probe at once."""
        for key in probes:
            self.redis.hset(key, "probe_until", "0")

    def reset(self, scope: str) -> None:
        """An admin closed the breaker by hand."""
        key = _state_key(scope)
        self.redis.delete(key, _fails_key(scope), key + ":n")
        self._transition(key, CLOSED, reason="reset by an administrator")

    def _transition(self, key: str, state: str, reason: str = "") -> None:
        scope = _scope_of(key)
        log.warning("Circuit breaker %s → %s%s", scope, state, f" ({reason})" if reason else "")
        self.redis.hincrby(TRANSITIONS_KEY, f"{scope}|{state}", 1)

    def states(self, scopes: Sequence[tuple[str, str, str]]) -> list[BreakerState]:
        """The state of each (scope, toolset id, tool) given, in two pipelined round trips."""
        now = self.clock()
        limits = self.limits
        pipe = self.redis.pipeline(transaction=False)
        for scope, _, _ in scopes:
            pipe.hgetall(_state_key(scope))
            pipe.zcount(_fails_key(scope), now - limits.window_s, "+inf")
        replies = pipe.execute()
        found = []
        for i, (scope, toolset_id, tool) in enumerate(scopes):
            raw = {_text(k): _text(v) for k, v in (replies[2 * i] or {}).items()}
            state = raw.get("state", CLOSED)
            opened = float(raw["opened_at"]) if raw.get("opened_at") else None
            retry = None
            if state == OPEN and opened is not None:
                retry = datetime.fromtimestamp(opened + limits.cooldown_s, UTC)
            found.append(
                BreakerState(
                    scope=scope,
                    toolset_id=toolset_id,
                    tool=tool,
                    state=state,
                    failures=int(replies[2 * i + 1] or 0),
                    opened_at=datetime.fromtimestamp(opened, UTC) if opened is not None else None,
                    retry_at=retry,
                )
            )
        return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def all_scopes() -> list[tuple[str, str, str]]:
    """(scope, toolset id, tool) of every breaker there is: one per registered tool, one per
    toolset whose tools share a server."""
    from ..registry import all_toolsets

    scopes = []
    for toolset in all_toolsets().values():
        if toolset.shared_breaker:
            scopes.append((server_scope(toolset.id), toolset.id, ""))
        scopes.extend((tool_scope(toolset.id, t.name), toolset.id, t.name) for t in toolset.tools)
    return scopes


def all_states() -> list[BreakerState]:
    """Every breaker's state (for the admin and the operations overview)."""
    return Breakers().states(all_scopes())


def transition_counts() -> dict[tuple[str, str], int]:
    """How many times each breaker went to each state, across all workers: (scope, state) → n."""
    from core.redis_client import sync_client

    raw = sync_client().hgetall(TRANSITIONS_KEY)
    counts = {}
    for field, value in raw.items():
        scope, _, state = _text(field).rpartition("|")
        counts[(scope, state)] = int(value)
    return counts
