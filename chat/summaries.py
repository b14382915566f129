"""One-line texts for tool cards: a live status while a tool runs, a summary when it is done.

A tool may define its own (`status_text`, `summarize` on the @tool decorator); otherwise these
defaults read the arguments and the result generically.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from toolsets.base import Tool

log = logging.getLogger(__name__)

MAX = 90
KEY_FIELDS = ("title", "name", "subject", "display", "answer", "result", "summary", "text", "message", "url", "status")


def truncate(text: str, limit: int = MAX) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def status_text(tool: Tool | None, display_name: str, arguments: Any) -> str:
    args = _as_dict(arguments)
    if tool is not None and tool.status_text is not None and args is not None:
        try:
            return truncate(tool.status_text(args))
        except Exception:  # a summary must never break a card
            log.debug("status_text of %s failed", tool.name, exc_info=True)
    if args:
        first = next((v for v in args.values() if isinstance(v, (str, int, float)) and str(v).strip()), None)
        if first is not None:
            return truncate(f"{display_name}: {first}…")
    return f"{display_name}…"


def summarize(tool: Tool | None, result: Any) -> str:
    if tool is not None and tool.summarize is not None:
        try:
            return truncate(tool.summarize(result))
        except Exception:
            log.debug("summarize of %s failed", tool.name, exc_info=True)
    return default_summary(result)


def summarize_error(message: str) -> str:
    first = next((line for line in str(message).splitlines() if line.strip()), "Failed")
    return truncate(first)


def default_summary(result: Any) -> str:
    """Counts arrays ("12 tasks from 3 projects"), picks key fields of objects, truncates text."""
    if result is None:
        return "No result"
    if isinstance(result, bool):
        return "Yes" if result else "No"
    if isinstance(result, (int, float)):
        return str(result)
    if isinstance(result, str):
        return truncate(result) if result.strip() else "Empty result"
    if isinstance(result, list):
        return _count(len(result), "item", result)
    if isinstance(result, dict):
        for key, value in result.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                return _count(len(value), key, value)
        for key in KEY_FIELDS:
            value = result.get(key)
            if isinstance(value, (str, int, float)) and str(value).strip():
                return truncate(str(value))
        for key, value in result.items():
            if isinstance(value, list):
                return _count(len(value), key, value)
        scalars = [f"{k}: {v}" for k, v in result.items() if isinstance(v, (str, int, float, bool))][:2]
        return truncate(", ".join(scalars)) if scalars else f"{len(result)} fields"
    return truncate(json.dumps(result, default=str))


def _count(n: int, noun: str, items: list[Any]) -> str:
    noun = noun.replace("_", " ")
    singular = noun[:-1] if noun.endswith("s") and not noun.endswith("ss") else noun
    text = f"{n} {singular if n == 1 else (noun if noun.endswith('s') else noun + 's')}"
    if n == 0:
        return f"No {noun if noun.endswith('s') else noun + 's'}"
    # "from 3 projects" when the items say which project they belong to.
    for group in ("project", "source", "folder", "calendar"):
        values = {item.get(group) for item in items if isinstance(item, dict) and item.get(group)}
        if len(values) > 1:
            return f"{text} from {len(values)} {group}s"
    return text


def _as_dict(arguments: Any) -> dict[str, Any] | None:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments or "{}")
        except (json.JSONDecodeError, ValueError):
            return None
        return value if isinstance(value, dict) else None
    return None
