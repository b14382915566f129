"""The approval card's view: what an "ask" tool call waits for, and where the answer goes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.urls import reverse

from toolsets.policy.approval import ApprovalRequest


def approval(request: ApprovalRequest) -> dict[str, Any]:
    """Kept in the card of the live turn (plain JSON), so a reload shows the same question."""
    from .cards import pretty_json  # cards shows this view: imported here, not at the top

    deadline = datetime.fromtimestamp(request.deadline, UTC)
    minutes = round(request.timeout_s / 60)
    return {
        "id": request.id,
        "url": reverse("chat:approval", args=[request.id]),
        "display_name": request.display_name,
        "always_allowable": request.always_allowable,
        "arguments": pretty_json(request.arguments),
        "deadline": deadline.isoformat(),
        "deadline_text": deadline.strftime("%H:%M UTC"),
        "timeout_text": f"{minutes} minute{'s' if minutes != 1 else ''}" if minutes else f"{request.timeout_s:g} s",
    }


def cached_text(cached_at: Any) -> str:
    """ "Cached result from 14:02:11 UTC, 23 Nov": when the call that produced it ran."""
    if isinstance(cached_at, str):
        try:
            cached_at = datetime.fromisoformat(cached_at)
        except ValueError:
            return ""
    if not isinstance(cached_at, datetime):
        return ""
    return "Cached result from " + cached_at.astimezone(UTC).strftime("%H:%M:%S UTC, %d %b")
