"""What a component type is, and what every type builds on.

A type is a module that exposes `component = Component(...)` and is listed in
`registry.COMPONENT_MODULES`. Its schema is built from the small helpers here, so every type
describes its fields the same way to the validator and to the system prompt (which prints each
field's `description`). The display helpers give fixed English formats: the same input always
gives the same HTML, whatever the server's locale, so a stored message never renders differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any


@dataclass(frozen=True)
class Component:
    """One component type: how its block is validated, documented and rendered."""

    name: str  # the `type` in the block
    description: str  # one line, for the system prompt
    schema: dict[str, Any]
    template: str
    label: str  # "task table": the placeholder says "Building task table…"
    example: Any
    prepare: Callable[[Any], dict[str, Any]]  # validated data → template context

    @property
    def placeholder(self) -> str:
        return f"Building {self.label}…"


# --- Schema builders ----------------------------------------------------------------------------


def text_field(max_length: int, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "maxLength": max_length}
    if description:
        schema["description"] = description
    return schema


def enum_field(values: dict[str, str], description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "enum": list(values)}
    if description:
        schema["description"] = description
    return schema


def array_of(items: dict[str, Any], max_items: int, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items, "maxItems": max_items}
    if description:
        schema["description"] = description
    return schema


def object_of(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


# The parser drops any value of a `"format": "uri"` field that is not an http(s) link.
URL = {"type": "string", "format": "uri", "maxLength": 2000, "description": "http(s) link"}
DATE = text_field(40, "ISO date, YYYY-MM-DD")
DATETIME = text_field(40, "ISO date-time, YYYY-MM-DDTHH:MM (or a date for all day)")
NAMES = array_of(text_field(120), 100, "names")
BOOLEAN = {"type": "boolean"}


# --- Display helpers ----------------------------------------------------------------------------

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def parse_when(value: str | None) -> date | datetime | None:
    if not value:
        return None
    text = value.strip()
    try:
        return date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
    except ValueError:
        return None


def day_text(day: date, *, weekday: bool = False) -> str:
    text = f"{day.day} {_MONTHS[day.month - 1]} {day.year}"
    return f"{_DAYS[day.weekday()]} {text}" if weekday else text


def when(value: str | None, *, weekday: bool = False) -> dict[str, str] | None:
    """→ {"text": "15 Feb 2026, 09:30", "iso": "2026-02-15T09:30:00"}; unparseable values are
    shown as written (iso "")."""
    if not value:
        return None
    parsed = parse_when(value)
    if parsed is None:
        return {"text": value, "iso": ""}
    if isinstance(parsed, datetime):
        return {"text": f"{day_text(parsed, weekday=weekday)}, {parsed:%H:%M}", "iso": parsed.isoformat()}
    return {"text": day_text(parsed, weekday=weekday), "iso": parsed.isoformat()}


def choice(value: str | None, labels: dict[str, str]) -> dict[str, str] | None:
    return {"key": value.lower(), "label": labels[value]} if value in labels else None


def initial(name: str) -> str:
    return next((c.upper() for c in name if c.isalnum()), "?")


def people(names: list[str], shown: int = 4) -> str:
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"
