"""How a tool call's values read on its card: arguments and results as indented JSON, and when a
cached result was made. Shared by the tool card (cards.py) and the approval card (approval.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def pretty_json(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


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
