"""A tool call's arguments while the model is still writing them, as an MCP App's View is shown
them (`ui/notifications/tool-input-partial`): the spec asks for a best-effort reading of the
incomplete JSON. What is complete is kept; a string being written is kept as far as it goes; a
key without its value yet, and a number or word cut off, are left out until they are whole."""

from __future__ import annotations

import json
from typing import Any

MAX_CHARS = 100_000  # past this, partial arguments are not shown (the whole input follows)


def _scan(text: str) -> tuple[list[str], bool, list[int]]:
    """The brackets still open, whether a string is, and where each comma outside a string is."""
    stack: list[str] = []
    in_string = escaped = False
    commas: list[int] = []
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
        elif char == ",":
            commas.append(index)
    return stack, in_string, commas


def _closed(text: str) -> Any:
    stack, in_string, _ = _scan(text)
    if in_string and text.endswith("\\"):
        text = text[:-1]
    try:
        return json.loads(text + ('"' if in_string else "") + "".join(reversed(stack)))
    except ValueError:
        return None


def partial_arguments(text: str) -> dict[str, Any] | None:
    """The object `text` begins, as far as it can be read; None before anything can be."""
    text = text.strip()
    if not text.startswith("{") or len(text) > MAX_CHARS:
        return None
    found = _closed(text)
    if not isinstance(found, dict):
        # A key or a value cut short: back to the last comma (the members before it are whole).
        _, _, commas = _scan(text)
        for comma in reversed(commas[-3:]):
            found = _closed(text[:comma])
            if isinstance(found, dict):
                break
        else:
            found = _closed("{") if not commas else None
    return found if isinstance(found, dict) else None
