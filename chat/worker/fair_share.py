"""Fair share of the workers: caps on how many turns one user, and one API token, run at once,
and a queue per user for the rest.

A turn is sent to the workers only once it holds a slot; until then it waits in its owner's
queue in Redis, holding no worker thread. One user's burst therefore queues that user's own
work, and everyone else's turns go straight to the workers.

Slots live in Redis, shared by every web and worker process: a sorted set of turn ids per
user (and per token), each scored by the time its slot lapses unless its worker's heartbeat
(`tessera:turn:<id>:alive`, chat.worker.loop.TurnWatch) is there. A turn waiting for a worker
has a few minutes (`DISPATCH_S`); once claimed, it is its heartbeat that keeps the slot, so a
killed worker's slots free themselves within the heartbeat's life (live.ALIVE_TTL_S). Every
end of a turn (finished, failed, stopped, interrupted) hands its slot back and starts the next
queued turn of that user at once; the reaper's round pumps every queue too, for slots that
lapsed on their own.

Every change is one Lua script, so two processes never admit past a cap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from core.redis_client import sync_client

log = logging.getLogger(__name__)

PREFIX = "tessera:fair"
WAITERS = f"{PREFIX}:waiters"  # users with queued turns
# How long a turn sent to the workers keeps its slot before a worker claims it: the queue in
# front of the workers is short (only admitted turns are in it), so this only matters when a
# message was lost; then the slot comes back on its own.
DISPATCH_S = 300.0
# What an API caller over its cap is told to wait before trying again.
RETRY_AFTER_S = 5
# How long a queued turn's note ("waiting for your other answers") is kept for the page.
NOTE_TTL_S = 86_400


def running_key(kind: str, who: str | int) -> str:
    return f"{PREFIX}:run:{kind}:{who}"


def waiting_key(user_id: int) -> str:
    return f"{PREFIX}:wait:{user_id}"


def note_key(turn_id: int) -> str:
    return f"{PREFIX}:note:{turn_id}"


@dataclass(frozen=True)
class Caps:
    """Running turns at once: per user, and per API token (0: no cap)."""

    user: int
    token: int

    @classmethod
    def load(cls) -> Caps:
        from chat.models import AppSettings

        app = AppSettings.load()
        return cls(user=int(app.running_turns_per_user), token=int(app.running_turns_per_token))


class Busy(Exception):
    """An API caller is at its cap: it should try again after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int = RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


# Shared by every script: counts a running set's live members, dropping those whose time ran
# out with no worker heartbeat (the turn's worker died, or its message was lost). The heartbeat's
# name is chat.live.key(turn, "alive") (a test holds the two together).
_COUNT = """
local function count(key, now)
  if key == '' then return 0 end
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', now)) do
    if redis.call('EXISTS', 'tessera:turn:' .. member .. ':alive') == 0 then
      redis.call('ZREM', key, member)
    end
  end
  return redis.call('ZCARD', key)
end
local function fits(ukey, tkey, now, ucap, tcap)
  return (ucap == 0 or count(ukey, now) < ucap) and (tkey == '' or tcap == 0 or count(tkey, now) < tcap)
end
local function take(ukey, tkey, turn, deadline)
  redis.call('ZADD', ukey, deadline, turn)
  redis.call('EXPIRE', ukey, 86400)
  if tkey ~= '' then
    redis.call('ZADD', tkey, deadline, turn)
    redis.call('EXPIRE', tkey, 86400)
  end
  redis.call('DEL', 'tessera:fair:note:' .. turn)
end
"""

# Admits the user's queued turns, oldest first, while they fit (a turn whose token is full
# waits, and the user's next turn of another token may pass it); returns the admitted ids.
# KEYS: the user's queue, the user's running set, the set of users with a queue.
# ARGV: now, deadline, user cap, token cap, user id.
_PUMP = (
    _COUNT
    + """
local now, deadline = tonumber(ARGV[1]), tonumber(ARGV[2])
local ucap, tcap = tonumber(ARGV[3]), tonumber(ARGV[4])
local admitted = {}
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if ucap ~= 0 and count(KEYS[2], now) >= ucap then break end
  local turn, token = string.match(entry, '^(%d+):(.*)$')
  local tkey = token ~= '' and ('tessera:fair:run:token:' .. token) or ''
  if fits(KEYS[2], tkey, now, ucap, tcap) then
    take(KEYS[2], tkey, turn, deadline)
    redis.call('LREM', KEYS[1], 1, entry)
    table.insert(admitted, entry)
  end
end
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[5]) end
return admitted
"""
)

# A new turn: admitted at once when it fits and nothing of its user waits ahead of it; else
# queued (returns 0), or, with ARGV[7] = 'refuse', neither (-2: the token's cap, -1: the user's).
# KEYS: the user's queue, the user's running set, the token's running set or '', the set of users
# with a queue. ARGV: now, deadline, user cap, token cap, user id, queue entry, mode, turn id.
_SUBMIT = (
    _COUNT
    + """
local now, deadline = tonumber(ARGV[1]), tonumber(ARGV[2])
local ucap, tcap = tonumber(ARGV[3]), tonumber(ARGV[4])
if redis.call('LLEN', KEYS[1]) == 0 and fits(KEYS[2], KEYS[3], now, ucap, tcap) then
  take(KEYS[2], KEYS[3], ARGV[8], deadline)
  return 1
end
if ARGV[7] == 'refuse' then
  if KEYS[3] ~= '' and tcap ~= 0 and count(KEYS[3], now) >= tcap then return -2 end
  return -1
end
redis.call('RPUSH', KEYS[1], ARGV[6])
redis.call('SADD', KEYS[4], ARGV[5])
return 0
"""
)


def _token_key(token: str) -> str:
    return running_key("token", token) if token else ""


def submit(turn_id: int, user_id: int, token: str = "", *, caps: Caps | None = None, refuse: bool = False) -> bool:
    """Takes a slot for a new turn; True if it may go to the workers now. Otherwise the turn is
    queued behind its user's other turns, or, with `refuse` (API callers, who get a 429), `Busy`
    is raised and nothing is kept. `token`: the API token (or OAuth client) it came through."""
    caps = caps or Caps.load()
    now = time.time()
    result = sync_client().eval(
        _SUBMIT,
        4,
        waiting_key(user_id),
        running_key("user", user_id),
        _token_key(token),
        WAITERS,
        now,
        now + DISPATCH_S,
        caps.user,
        caps.token,
        user_id,
        f"{turn_id}:{token}",
        "refuse" if refuse else "queue",
        turn_id,
    )
    if int(result) < 0:
        raise Busy(busy_message(caps, token_full=int(result) == -2))
    return int(result) == 1


def _answers(n: int) -> str:
    return f"{n} answer{'' if n == 1 else 's'}"


def busy_message(caps: Caps, *, token_full: bool) -> str:
    if token_full:
        return (
            f"This token already has {_answers(caps.token)} running, the most one token may run at once. "
            "Try again when one has finished."
        )
    return (
        f"You already have {_answers(caps.user)} running or queued, the most one person may run at once. "
        "Try again when one has finished."
    )


def queued_note(caps: Caps) -> str:
    """What a queued turn's page says."""
    return (
        f"Queued: you have {_answers(caps.user)} running, the most one person may run at once. "
        "This one starts as soon as one of them finishes."
    )


def pump(user_id: int, caps: Caps) -> list[tuple[int, str]]:
    """Admits the user's queued turns that fit now; returns them (turn id, token)."""
    now = time.time()
    admitted = sync_client().eval(
        _PUMP,
        3,
        waiting_key(user_id),
        running_key("user", user_id),
        WAITERS,
        now,
        now + DISPATCH_S,
        caps.user,
        caps.token,
        user_id,
    )
    return [_entry(item) for item in admitted]


def _entry(item: bytes | str) -> tuple[int, str]:
    text = item.decode() if isinstance(item, bytes) else item
    turn, _, token = text.partition(":")
    return int(turn), token


def claimed(
    turn_id: int, user_id: int, token: str, heartbeat: tuple[str, int] | None = None, read: str = ""
) -> dict[bytes, bytes]:
    """A worker took the turn: from now on its heartbeat holds the slot (counted even if its
    dispatch time had run out, so the caps stay true). `heartbeat`: the turn's heartbeat key
    and its life in seconds, set in the same round trip. `read`: a hash the turn needs, read in
    that round trip too (its fields, or none)."""
    with sync_client().pipeline(transaction=True) as pipe:
        if heartbeat is not None:
            pipe.set(heartbeat[0], "1", ex=heartbeat[1])
        for key in (running_key("user", user_id), _token_key(token)):
            if key:
                pipe.zadd(key, {str(turn_id): time.time()})
                pipe.expire(key, 86_400)
        if read:
            pipe.hgetall(read)
        done = pipe.execute()
    return done[-1] if read else {}


def release(turn_id: int, user_id: int, token: str, forget: Iterable[str] = ()) -> bool:
    """The turn has ended (any way) or will never run: its slot goes back, and it leaves its
    user's queue if it was still there. Returns whether other turns of the user still wait, so
    the common end (nothing queued) costs one round trip and no pump. Skipping the pump then is
    safe: a turn queued after this read pumps once itself (turn_queue.enqueue). `forget`: keys
    of the ended turn deleted in the same round trip (its heartbeat, its Stop flag)."""
    with sync_client().pipeline(transaction=True) as pipe:
        forget = list(forget)
        if forget:
            pipe.delete(*forget)
        pipe.zrem(running_key("user", user_id), str(turn_id))
        if token:
            pipe.zrem(running_key("token", token), str(turn_id))
        pipe.lrem(waiting_key(user_id), 1, f"{turn_id}:{token}")
        pipe.delete(note_key(turn_id))
        pipe.llen(waiting_key(user_id))
        return int(pipe.execute()[-1]) > 0


def waiting_users() -> list[int]:
    return [int(member) for member in sync_client().smembers(WAITERS)]


def notes(turn_ids: Iterable[int]) -> dict[int, str]:
    """The queued notes of these turns (one round trip), for a page showing them."""
    ids = list(turn_ids)
    if not ids:
        return {}
    found = sync_client().mget([note_key(t) for t in ids])
    return {t: n.decode() if isinstance(n, bytes) else str(n) for t, n in zip(ids, found, strict=True) if n}
