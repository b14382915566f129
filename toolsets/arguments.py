"""A tool call's arguments as the model sent them: read as a JSON object (with a message that
quotes what was sent when they are not one) and checked against the tool's schema."""

from __future__ import annotations

import json
from typing import Any

from core import bounded_schema

from .base import Tool


def parse(raw: str | dict[str, Any]) -> tuple[dict[str, Any], str]:
    if isinstance(raw, dict):
        return raw, ""
    text = raw.strip() or "{}"
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return {}, f"The arguments are not valid JSON ({exc.msg} at position {exc.pos}){_quote(text)}"
    except (ValueError, RecursionError) as exc:
        return {}, f"The arguments are not valid JSON ({exc}){_quote(text)}"
    if not isinstance(value, dict):
        return {}, f"The arguments must be a JSON object{_quote(text)}"
    return value, ""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _quote(text: str, limit: int = 300) -> str:
    # The agent's transcript carries "{}" in place of arguments that are not a JSON object (see
    # agent.types.transcript_arguments): this quote is where the model and the reader still
    # see what was sent.
    shown = text if len(text) <= limit else text[:limit] + "…"
    return f". Received: {shown}"


def validation_errors(tool_: Tool, arguments: dict[str, Any]) -> list[str]:
    # An MCP server's schema may carry patterns: they run bounded, not with `re` on the loop.
    errors = []
    for error in sorted(bounded_schema.errors(tool_.parameters, arguments), key=lambda e: list(e.path)):
        where = "/".join(str(part) for part in error.path) or "arguments"
        errors.append(f"{where}: {error.message}")
    return errors
