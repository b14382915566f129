"""The card of a question to the person (`core.questions`), one view for every kind: what a
tool call waits for, and where the answer goes (`chat.question_views.answer`, one URL for all).

Kept in the card of the live turn (plain JSON), so a reload shows the same question with the
same defaults. A kind adds its own fields; `chat/_question.html` draws the kind's body."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.urls import reverse

from toolsets.mcp.elicitation import ElicitationRequest
from toolsets.policy.approval import ApprovalRequest

from .values import pretty_json


@dataclass(frozen=True)
class Kind:
    """How a kind's waiting card reads."""

    summary: str  # the card's summary line while it waits
    status_label: str  # its badge


KINDS = {
    "approval": Kind("Waiting for your approval", "Needs approval"),
    "elicitation": Kind("Waiting for your answer", "Needs your answer"),
}


def question(kind: str, question_id: str, timeout_s: float, deadline: float, **shown: Any) -> dict[str, Any]:
    when = datetime.fromtimestamp(deadline, UTC)
    minutes = round(timeout_s / 60)
    return {
        "kind": kind,
        "id": question_id,
        "url": reverse("chat:question", args=[question_id]),
        "deadline": when.isoformat(),
        "deadline_text": when.strftime("%H:%M UTC"),
        "timeout_text": f"{minutes} minute{'s' if minutes != 1 else ''}" if minutes else f"{timeout_s:g} s",
        **shown,
    }


def approval(request: ApprovalRequest) -> dict[str, Any]:
    """An "ask" tool call waiting for the chat's owner."""
    return question(
        "approval",
        request.id,
        request.timeout_s,
        request.deadline,
        display_name=request.display_name,
        always_allowable=request.always_allowable,
        arguments=pretty_json(request.arguments),
    )


def elicitation(request: ElicitationRequest) -> dict[str, Any]:
    """An MCP server's question during a call. Everything in it came from the server: the
    partial escapes it all."""
    return question(
        "elicitation",
        request.id,
        request.timeout_s,
        request.deadline,
        mode=request.mode,
        server=request.server,
        message=request.message,
        fields=request.fields,
        link=request.url,
        domain=request.domain,
    )
