"""The system prompt's documentation of the cards, generated from the registry, so what the
model is told and what the parser accepts cannot drift apart."""

from __future__ import annotations

import json
from typing import Any

from .registry import all_components


def prompt_documentation() -> str:
    """How to write each registered component, generated from the registry."""
    parts = [
        "## Cards (components)",
        "For structured data — tasks, calendar events, emails, meeting notes, social posts — write a component "
        "block instead of a Markdown table or list; the user sees it as a card. Use plain Markdown for everything "
        "else. Text around blocks is Markdown, and a message may hold several blocks. Put each block on its own "
        "lines, with a blank line before and after:",
        ':::component{type="TYPE"}\nJSON DATA\n:::',
        "The data must be valid JSON (double quotes, no comments, no trailing commas) of the shape below; fields "
        "not marked required may be left out. Use only data you have (from the user or a tool).",
    ]
    for component in all_components().values():
        example = json.dumps(component.example, ensure_ascii=False)
        parts.append(
            f"### {component.name}\n{component.description}\nData: {_shape(component.schema)}\n"
            f'Example:\n:::component{{type="{component.name}"}}\n{example}\n:::'
        )
    return "\n\n".join(parts)


def _shape(schema: dict[str, Any], indent: str = "") -> str:
    if schema.get("type") == "array" and schema["items"].get("type") == "object":
        return f"a JSON array of objects with:\n{_fields(schema['items'], indent)}"
    return f"a JSON object with:\n{_fields(schema, indent)}"


def _fields(schema: dict[str, Any], indent: str) -> str:
    lines = []
    for name, field in schema["properties"].items():
        required = ", required" if name in schema.get("required", []) else ""
        note = f": {field['description']}" if field.get("description") else ""
        if field.get("type") == "array" and field["items"].get("type") == "object":
            lines.append(f'{indent}- "{name}": array of objects with:\n{_fields(field["items"], indent + "  ")}')
        elif field.get("type") == "array":
            lines.append(f'{indent}- "{name}" (array of {_kind(field["items"])}s{required}){note}')
        elif "enum" in field:
            values = ", ".join(f'"{v}"' for v in field["enum"])
            lines.append(f'{indent}- "{name}"{" (required)" if required else ""}: one of {values}')
        else:
            lines.append(f'{indent}- "{name}" ({_kind(field)}{required}){note}')
    return "\n".join(lines)


def _kind(schema: dict[str, Any]) -> str:
    return {"string": "string", "boolean": "true/false", "integer": "integer", "number": "number"}.get(
        schema.get("type", ""), "value"
    )
