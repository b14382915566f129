"""Token usage: what each model call cost, per turn and per user, and how the page shows it."""

from __future__ import annotations

from typing import Any

from agent.types import AssistantMessage, Usage
from chat.models import TokenUsage


def message_fields(message: AssistantMessage) -> dict[str, Any]:
    """An assistant message's usage columns; null when the provider reported none."""
    reported = message.usage.total > 0
    return {
        "prompt_tokens": message.usage.prompt_tokens if reported else None,
        "completion_tokens": message.usage.completion_tokens if reported else None,
        "finish_reason": (message.finish_reason or "")[:40],
    }


def record_call(owner_id: int, usage: Usage) -> None:
    """Adds one model call to its user's total (blocking: call from a thread)."""
    if usage.total <= 0:
        return
    TokenUsage.record(owner_id, usage.prompt_tokens, usage.completion_tokens)


def view(total: dict[str, Any] | None, calls: list[tuple[int, int | None, int | None]]) -> dict[str, Any] | None:
    """What the turn shows: the total, and a per-call breakdown for the tooltip. `calls` are
    (step, prompt tokens, completion tokens) of each model call."""
    prompt = _int((total or {}).get("prompt_tokens"))
    completion = _int((total or {}).get("completion_tokens"))
    if not prompt and not completion:
        prompt = sum(_int(p) for _, p, _ in calls)
        completion = sum(_int(c) for _, _, c in calls)
    if not prompt and not completion:
        return None
    cached = _int((total or {}).get("cached_tokens"))
    lines = [f"Model call {step + 1}: {_int(p):,} in, {_int(c):,} out" for step, p, c in calls if _int(p) or _int(c)]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "text": f"{prompt + completion:,} tokens",
        "detail": f"{prompt:,} in · {completion:,} out" + (f" · {cached:,} cached" if cached else ""),
        "title": "\n".join(lines) if len(lines) > 1 else "",
    }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
