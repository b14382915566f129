"""A component block's text → its validated data, or why it cannot be shown.

Model data is untrusted and models are sloppy: letter case in enum values is forgiven, a JSON
code fence inside the block is unwrapped, and links that are not http(s) are dropped before
validation. Everything else that does not match the type's schema is an error a person can read
("item 2 › status: should be one of …"), shown on the card's notice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import jsonschema

from .registry import all_components
from .syntax import CLOSER, opener_type


@dataclass(frozen=True)
class Parsed:
    type: str
    body: str  # the raw text between the opener and the closer
    data: Any = None
    error: str = ""  # why the card cannot be shown; "" when `data` is valid


def parse(source: str) -> Parsed:
    """A component block (opener line, JSON, closer line) → its validated data or an error."""
    lines = source.rstrip().split("\n")
    type_name = opener_type(lines[0]) or ""
    body_lines = lines[1:]
    closed = bool(body_lines) and CLOSER.match(body_lines[-1]) is not None
    if closed:
        body_lines = body_lines[:-1]
    body = "\n".join(body_lines).strip("\n")
    component = all_components().get(type_name)
    if component is None:
        reason = f"unknown component type “{_short(type_name)}”" if type_name else "the block names no component type"
        return Parsed(type_name, body, error=reason)
    text = _strip_code_fence(body)
    if not text.strip():
        return Parsed(type_name, body, error="the block is empty")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        if not closed:
            return Parsed(type_name, body, error="the block was cut off before it was finished")
        detail = f"{exc.msg}, line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return Parsed(
            type_name, body, error=f"the data is not valid JSON ({detail})" if detail else "the data is not valid JSON"
        )
    data = _clean(data, component.schema)
    error = jsonschema.exceptions.best_match(_validator(type_name).iter_errors(data))
    if error is not None:
        return Parsed(type_name, body, error=_describe_error(error))
    return Parsed(type_name, body, data=data)


def _strip_code_fence(body: str) -> str:
    # Some models wrap the JSON in ```json … ``` inside the block.
    lines = body.strip().split("\n")
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1])
    return body


@cache
def _validator(type_name: str) -> jsonschema.protocols.Validator:
    schema = all_components()[type_name].schema
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # type: ignore[no-any-return]


def _clean(value: Any, schema: dict[str, Any]) -> Any:
    """Forgives letter case in enums ("In progress" → IN_PROGRESS) and drops links that are not
    http(s). Runs before validation, so it must accept any shape."""
    if isinstance(value, str):
        if "enum" in schema:
            folded = re.sub(r"[\s-]+", "_", value.strip())
            return folded.upper() if all(v.isupper() for v in schema["enum"]) else folded.lower()
        if schema.get("format") == "uri":
            return value if safe_url(value) else None
        return value
    if isinstance(value, dict) and "properties" in schema:
        cleaned = {}
        for key, item in value.items():
            item = _clean(item, schema["properties"][key]) if key in schema["properties"] else item
            if item is not None or key not in schema["properties"]:
                cleaned[key] = item
        return cleaned
    if isinstance(value, list) and "items" in schema:
        return [_clean(item, schema["items"]) for item in value]
    return value


def safe_url(value: str) -> bool:
    if not value or len(value) > 2000 or any(c.isspace() or ord(c) < 32 for c in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "true/false",
    int: "a number",
    float: "a number",
}


def _describe_error(error: jsonschema.ValidationError) -> str:
    where = " › ".join(f"item {p + 1}" if isinstance(p, int) else str(p) for p in error.absolute_path)
    instance = error.instance
    if error.validator == "type":
        expected = error.validator_value if isinstance(error.validator_value, str) else error.validator_value[0]
        got = next((name for kind, name in _JSON_TYPES.items() if isinstance(instance, kind)), "null")
        article = "an" if expected[0] in "aeiou" else "a"
        message = f"should be {article} {expected}, not {got}"
    elif error.validator == "enum":
        message = f"should be one of {', '.join(map(str, error.validator_value))}, not “{_short(instance)}”"
    elif error.validator == "required":
        message = error.message.replace("'", "“", 1).replace("'", "”", 1)
    elif error.validator in ("maxLength", "maxItems"):
        message = f"is too long (at most {error.validator_value})"
    else:
        message = _short(error.message, 160)
    return f"{where}: {message}" if where else message


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
