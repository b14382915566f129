"""The question card's view: what an MCP server asks the user during a call, and where the
answer goes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.urls import reverse

from toolsets.mcp.elicitation import ElicitationRequest


def elicitation(request: ElicitationRequest) -> dict[str, Any]:
    """Kept in the card of the live turn (plain JSON), so a reload shows the same question with
    the same defaults. Everything in it came from the server: the partial escapes it all."""
    deadline = datetime.fromtimestamp(request.deadline, UTC)
    minutes = round(request.timeout_s / 60)
    return {
        "id": request.id,
        "url": reverse("chat:elicitation", args=[request.id]),
        "mode": request.mode,
        "server": request.server,
        "message": request.message,
        "fields": request.fields,
        "link": request.url,
        "domain": request.domain,
        "deadline": deadline.isoformat(),
        "deadline_text": deadline.strftime("%H:%M UTC"),
        "timeout_text": f"{minutes} minute{'s' if minutes != 1 else ''}" if minutes else f"{request.timeout_s:g} s",
    }
