"""Asking a person something and waiting for the answer: one pending-question store, in Redis.

Every "ask the person" in Tessera is a `Question` of some kind (a tool call's approval, an MCP
server's form or page to open): who may answer it (`owner_id`), what it shows (`payload`, the
kind's own plain JSON) and until when (`deadline`). The process that asks opens the question and
waits for the answer by polling one key, an `await asyncio.sleep` between looks: a waiting turn
holds no thread, no connection and no time on its event loop, and any web process (any tab, the
approval page an MCP client opened) can answer it.

An answer is recorded once, atomically (a Lua script: only while the question is in the store,
and only the first answer), so a replayed or concurrent POST changes nothing. The asker stops
waiting at the deadline and closes the question (answered, timed out, or the asking call
stopped), which withdraws it: an answer arriving later finds nothing to answer. A question
nobody waits on between two requests (the `/mcp` round trip: the client calls again once its
user answered) expires by itself `GRACE_S` after its deadline; until then an answer still
counts when the client comes back.

The store does not interpret kinds or answers: the kinds' modules (`toolsets.policy.approval`,
`toolsets.mcp.elicitation`) turn answers into their decisions, and the chat's answer view
(`chat.question_views`) checks and validates them by kind.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

PREFIX = "tessera:ask"
POLL_S = 0.25
ID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
# How long a question outlives its deadline in Redis (a client of the `/mcp` round trip calling
# again a little late still finds it), and how long an answer is kept (a client calling again
# after the question expired reads it).
GRACE_S = 120
ANSWER_TTL_S = 600

Recorded = Literal["recorded", "answered", "gone"]

# KEYS: the question, its answer. ARGV: the answer, its TTL. Returns 1 (recorded), 2 (already
# answered) or 0 (no such question: never asked, withdrawn, or expired).
_ANSWER_ONCE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'EX', ARGV[2]) then return 1 end
return 2
"""
_RECORDED: dict[int, Recorded] = {0: "gone", 1: "recorded", 2: "answered"}


def new_id() -> str:
    return secrets.token_urlsafe(18)


@dataclass
class Question:
    """One question to one person. `payload` is the kind's (plain JSON: it is stored)."""

    kind: str
    owner_id: int
    payload: dict[str, Any]
    timeout_s: float
    id: str = field(default_factory=new_id)
    deadline: float = 0.0  # wall-clock time, set when the question opens


def _key(question_id: str) -> str:
    return f"{PREFIX}:{question_id}"


def answer_key(question_id: str) -> str:
    return f"{PREFIX}:{question_id}:answer"


def _loads(raw: bytes | str | None) -> Question | None:
    if not raw:
        return None
    data = json.loads(raw)
    return Question(
        kind=str(data["kind"]),
        owner_id=int(data["owner_id"]),
        payload=dict(data.get("payload") or {}),
        timeout_s=float(data["timeout_s"]),
        id=str(data["id"]),
        deadline=float(data["deadline"]),
    )


def _answer(raw: bytes | str | None) -> dict[str, Any] | None:
    if not raw:
        return None
    value = json.loads(raw)
    return value if isinstance(value, dict) else None


async def ask(redis: Any, question: Question) -> Question:
    """Opens the question (an asyncio Redis client): it can be answered from now until its deadline."""
    question.deadline = time.time() + question.timeout_s
    raw = json.dumps(asdict(question), default=str)
    await redis.set(_key(question.id), raw, ex=max(1, int(question.timeout_s)) + GRACE_S)
    return question


async def wait(redis: Any, question: Question, *, poll_s: float = POLL_S) -> dict[str, Any] | None:
    """The answer, or None at the deadline. Cancelling the awaiting task (Stop) ends the wait at
    once; the asker closes the question either way."""
    while True:
        found = _answer(await redis.get(answer_key(question.id)))
        if found is not None:
            return found
        left = question.deadline - time.time()
        if left <= 0:
            return None
        await asyncio.sleep(min(poll_s, left))


async def close(redis: Any, question_id: str) -> None:
    """Withdraws the question and its answer (answered, timed out, cancelled): nobody can answer
    it any more."""
    await redis.delete(_key(question_id), answer_key(question_id))


async def find(redis: Any, question_id: str, kind: str | None = None) -> Question | None:
    """A question in the store (async client), or None: unknown, withdrawn, expired, or of
    another kind."""
    if not ID_RE.match(question_id):
        return None
    found = _loads(await redis.get(_key(question_id)))
    return found if found is not None and kind in (None, found.kind) else None


async def answered(redis: Any, question_id: str) -> dict[str, Any] | None:
    """The answer given, also after the question itself left Redis (the answer outlives it)."""
    if not ID_RE.match(question_id):
        return None
    return _answer(await redis.get(answer_key(question_id)))


def pending(redis: Any, question_id: str, kind: str | None = None) -> Question | None:
    """`find` for the web process (a sync client)."""
    if not ID_RE.match(question_id):
        return None
    found = _loads(redis.get(_key(question_id)))
    return found if found is not None and kind in (None, found.kind) else None


def answer(redis: Any, question_id: str, value: dict[str, Any]) -> Recorded:
    """Records the answer (a sync client) if the question is there and unanswered: "recorded";
    "answered" if another answer came first; "gone" if there is nothing to answer."""
    if not ID_RE.match(question_id):
        return "gone"
    found = redis.eval(_ANSWER_ONCE, 2, _key(question_id), answer_key(question_id), json.dumps(value), ANSWER_TTL_S)
    return _RECORDED.get(int(found), "gone")
