"""Asking the user before an "ask" tool runs: a question of kind "approval" in the one
pending-question store (`core.questions`).

The asker opens the request (who may answer it: the chat's owner, or an MCP caller's token
owner) and waits for the answer; any web process (any tab) answers it through the chat's answer
view. The first answer wins; no answer before the deadline counts as a denial.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from core import questions

KIND = "approval"
PREFIX = questions.PREFIX
POLL_S = questions.POLL_S
MAX_REASON = 500
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
    id: str = field(default_factory=questions.new_id)
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


def question(
    request: ApprovalRequest, *, chat_id: int | None, turn_id: int | None, user_id: int, client: str = ""
) -> questions.Question:
    """The request as a question to `user_id`. A chat's call names its chat and turn; an MCP
    client's call has neither and names the client instead (its approval page says who asks)."""
    payload = {"chat_id": chat_id, "turn_id": turn_id, "client": client, **asdict(request)}
    payload.pop("id"), payload.pop("deadline")
    return questions.Question(KIND, user_id, payload, request.timeout_s, id=request.id)


def decision(answer: dict[str, Any] | None) -> Decision:
    """The answer stored for an approval (None: nobody answered in time)."""
    if answer is None:
        return Decision(False, outcome=TIMED_OUT)
    approved = bool(answer.get("approved"))
    return Decision(
        approved, str(answer.get("reason", "")), bool(answer.get("always")), APPROVED if approved else DENIED
    )


def answer_value(*, approved: bool, reason: str = "", always: bool = False) -> dict[str, Any]:
    return {"approved": approved, "reason": reason[:MAX_REASON], "always": always}


async def open_request(
    redis: Any,
    request: ApprovalRequest,
    *,
    chat_id: int | None,
    turn_id: int | None,
    user_id: int,
    client: str = "",
) -> None:
    """Opens the request (see `question`)."""
    opened = await questions.ask(
        redis, question(request, chat_id=chat_id, turn_id=turn_id, user_id=user_id, client=client)
    )
    request.deadline = opened.deadline


async def wait(redis: Any, request: ApprovalRequest, *, poll_s: float = POLL_S) -> Decision:
    """The user's answer, or a timed-out denial at the deadline. Cancelling the awaiting task
    (Stop) ends the wait at once."""
    asked = questions.Question(KIND, 0, {}, request.timeout_s, id=request.id, deadline=request.deadline)
    return decision(await questions.wait(redis, asked, poll_s=poll_s))


async def close(redis: Any, approval_id: str) -> None:
    await questions.close(redis, approval_id)
