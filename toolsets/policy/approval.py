"""Asking the user before an "ask" tool runs: the request, the wait and the answer, in Redis.

The worker opens a request (who may answer it: the chat's owner) and waits for the answer by
polling one key: an `await asyncio.sleep` between looks, so the waiting turn holds no thread,
no connection and no time on the event loop, and any web process (any tab) can answer. The
first answer wins (`SET NX`); no answer before the deadline counts as a denial.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

PREFIX = "tessera:policy:approval"
POLL_S = 0.25
MAX_REASON = 500
ID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
APPROVED, DENIED, TIMED_OUT, ALLOWED_IN_CHAT, PRE_APPROVED = (
    "approved",
    "denied",
    "timed_out",
    "allowed_in_chat",
    "pre_approved",
)


@dataclass
class ApprovalRequest:
    """What the user is asked about."""

    toolset_id: str
    tool: str
    name: str  # the qualified name the model called
    display_name: str
    arguments: dict[str, Any]
    timeout_s: float
    # False: this tool asks every time (no "Always allow this tool in this chat").
    always_allowable: bool = True
    id: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    deadline: float = 0.0  # wall-clock time, set when the request opens


@dataclass(frozen=True)
class Decision:
    approved: bool
    reason: str = ""
    always: bool = False
    outcome: str = ""  # approved | denied | timed_out

    def error_message(self, timeout_s: float) -> str:
        if self.outcome == TIMED_OUT:
            minutes = timeout_s / 60
            span = f"{minutes:g} minute{'s' if minutes != 1 else ''}" if timeout_s >= 60 else f"{timeout_s:g} s"
            return f"Nobody approved this call within {span}, so it was treated as denied and did not run."
        text = "The user denied this call; it did not run."
        return f"{text} Their reason: {self.reason}" if self.reason else text


Approver = Callable[[ApprovalRequest], Awaitable[Decision]]


def _key(approval_id: str) -> str:
    return f"{PREFIX}:{approval_id}"


def _answer_key(approval_id: str) -> str:
    return f"{PREFIX}:{approval_id}:answer"


async def open_request(
    redis: Any,
    request: ApprovalRequest,
    *,
    chat_id: int | None,
    turn_id: int | None,
    user_id: int,
    client: str = "",
) -> None:
    """Opens the request. A chat's call names its chat and turn; an MCP client's call has
    neither and names the client instead (its approval page says who is asking)."""
    request.deadline = time.time() + request.timeout_s
    meta = {"chat_id": chat_id, "turn_id": turn_id, "user_id": user_id, "client": client, **asdict(request)}
    await redis.set(_key(request.id), json.dumps(meta, default=str), ex=int(request.timeout_s) + 120)


async def wait(redis: Any, request: ApprovalRequest, *, poll_s: float = POLL_S) -> Decision:
    """The user's answer, or a timed-out denial at the deadline. Cancelling the awaiting task
    (Stop) ends the wait at once."""
    while True:
        raw = await redis.get(_answer_key(request.id))
        if raw:
            data = json.loads(raw)
            approved = bool(data.get("approved"))
            return Decision(
                approved, str(data.get("reason", "")), bool(data.get("always")), APPROVED if approved else DENIED
            )
        left = request.deadline - time.time()
        if left <= 0:
            return Decision(False, outcome=TIMED_OUT)
        await asyncio.sleep(min(poll_s, left))


async def close(redis: Any, approval_id: str) -> None:
    await redis.delete(_key(approval_id), _answer_key(approval_id))


def pending(redis: Any, approval_id: str) -> dict[str, Any] | None:
    """An open request's details (sync: for the web process), or None."""
    if not ID_RE.match(approval_id):
        return None
    raw = redis.get(_key(approval_id))
    return json.loads(raw) if raw else None


def answer(redis: Any, approval_id: str, *, approved: bool, reason: str = "", always: bool = False) -> bool:
    """Records the answer; False if the request had already been answered."""
    payload = json.dumps({"approved": approved, "reason": reason[:MAX_REASON], "always": always})
    return bool(redis.set(_answer_key(approval_id), payload, nx=True, ex=600))
