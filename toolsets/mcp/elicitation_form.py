"""The form of an MCP server's question (elicitation): its requested schema drawn as fields,
a submitted form parsed back into the content asked for, and checked against the schema; and a
URL-mode page's address checked.

The requested schema is untrusted: only the spec's flat form (string, number, integer, boolean,
single and multiple choice) within size limits is drawn; anything else is refused with an error
the server receives. Its patterns run with a bounded engine within a time budget
(`core.bounded_schema`): a pattern too costly to compile is refused with the schema, one too
slow to run is a field error, never a stalled process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator

from core import bounded_schema

from . import untrusted

# What a requested schema may hold to be drawn: the spec's flat form, within bounds that keep a
# card readable and a hostile server's schema small.
MAX_SCHEMA_BYTES = 32_000
MAX_FIELDS = 30
MAX_OPTIONS = 100
MAX_TEXT = 10_000
MAX_MESSAGE = 2_000
MAX_TITLE = 200
MAX_DESCRIPTION = 1_000
MAX_URL = 2_048
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
FORMATS = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}


class SchemaRefused(ValueError):
    """The server's requested schema is not one Tessera draws."""


# --- The form: a requested schema, drawn and checked ----------------------------------------------


def form_fields(schema: Any) -> list[dict[str, Any]]:
    """The fields of a flat requested schema, in its order; raises SchemaRefused with a reason a
    server can act on for anything else."""
    if not isinstance(schema, dict):
        raise SchemaRefused("the requested schema is not an object")
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
        raise SchemaRefused(f"the requested schema is larger than {MAX_SCHEMA_BYTES} bytes")
    if schema.get("type", "object") != "object":
        raise SchemaRefused("the requested schema must be of type object")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise SchemaRefused("the requested schema has no properties")
    if len(properties) > MAX_FIELDS:
        raise SchemaRefused(f"the requested schema has more than {MAX_FIELDS} fields")
    required = schema.get("required") or []
    if not isinstance(required, list):
        raise SchemaRefused("`required` must be a list")
    problem = bounded_schema.schema_problems(schema)
    if problem:
        raise SchemaRefused(problem)
    fields = []
    for index, (name, spec) in enumerate(properties.items()):
        if not NAME_RE.match(str(name)):
            raise SchemaRefused(f"field name {str(name)[:40]!r} is not a plain name")
        if not isinstance(spec, dict):
            raise SchemaRefused(f"field {name} is not described by an object")
        fields.append(_field(index, name, spec, name in required))
    return fields


def _field(index: int, name: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    kind = spec.get("type")
    view: dict[str, Any] = {
        "key": f"field-{index}",
        "name": name,
        "label": untrusted.clean_text(spec.get("title"), MAX_TITLE).strip() or name,
        "description": untrusted.clean_text(spec.get("description"), MAX_DESCRIPTION).strip(),
        "required": required,
        "type": kind,
    }
    default = spec.get("default")
    if kind == "string" and ("enum" in spec or "oneOf" in spec or "anyOf" in spec):
        view.update(kind="select", options=_options(name, spec), value=default if isinstance(default, str) else "")
    elif kind == "string":
        fmt = spec.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise SchemaRefused(f"field {name}: format {str(fmt)[:40]!r} is not supported")
        view.update(
            kind="text",
            format=fmt or "",
            input_type=FORMATS.get(fmt or "", "text"),
            min_length=_bound(spec, "minLength", int),
            max_length=min(_bound(spec, "maxLength", int) or MAX_TEXT, MAX_TEXT),
            value=_shown_default(default, fmt) if isinstance(default, str) else "",
        )
    elif kind in ("number", "integer"):
        view.update(
            kind="number",
            minimum=_bound(spec, "minimum", float),
            maximum=_bound(spec, "maximum", float),
            step="1" if kind == "integer" else "any",
            value=_number_text(default) if isinstance(default, int | float) and not isinstance(default, bool) else "",
        )
    elif kind == "boolean":
        view.update(kind="boolean", value=default is True)
    elif kind == "array":
        items = spec.get("items")
        if not isinstance(items, dict) or not ("enum" in items or "anyOf" in items or "oneOf" in items):
            raise SchemaRefused(f"field {name}: only lists of choices are supported")
        chosen = default if isinstance(default, list) else []
        view.update(
            kind="multi",
            options=_options(name, items),
            value=[str(v) for v in chosen],
            min_items=_bound(spec, "minItems", int),
            max_items=_bound(spec, "maxItems", int),
        )
    elif kind == "object":
        raise SchemaRefused(f"field {name}: nested objects are not supported")
    else:
        raise SchemaRefused(f"field {name}: type {str(kind)[:40]!r} is not supported")
    if view["kind"] in ("select", "multi"):
        values = {o["value"] for o in view["options"]}
        chosen_values = view["value"] if isinstance(view["value"], list) else [view["value"]]
        for option in view["options"]:
            option["selected"] = option["value"] in chosen_values
        view["value"] = [v for v in chosen_values if v in values] if view["kind"] == "multi" else view["value"]
    return view


def _options(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Choices: `enum` (with the legacy `enumNames` titles) or titled `oneOf`/`anyOf` consts."""
    options: list[dict[str, Any]] = []
    if isinstance(spec.get("enum"), list):
        found = spec.get("enumNames")
        titles: list[Any] = found if isinstance(found, list) else []
        for i, value in enumerate(spec["enum"]):
            title = titles[i] if i < len(titles) else value
            options.append({"value": value, "label": title})
    else:
        for choice in spec.get("oneOf") or spec.get("anyOf") or []:
            if not isinstance(choice, dict) or "const" not in choice:
                raise SchemaRefused(f"field {name}: a choice without a const value")
            options.append({"value": choice["const"], "label": choice.get("title", choice["const"])})
    if not options:
        raise SchemaRefused(f"field {name}: no choices")
    if len(options) > MAX_OPTIONS:
        raise SchemaRefused(f"field {name}: more than {MAX_OPTIONS} choices")
    for option in options:
        if not isinstance(option["value"], str):
            raise SchemaRefused(f"field {name}: choices must be strings")
        option["value"] = option["value"][:MAX_TITLE]
        option["label"] = untrusted.clean_text(str(option["label"]), MAX_TITLE).strip() or option["value"]
    return options


def _bound(spec: dict[str, Any], key: str, kind: type) -> Any:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaRefused(f"{key} must be a number")
    return kind(value)


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _shown_default(value: str, fmt: str | None) -> str:
    """A default as its input shows it: a date-time input takes local-looking UTC minutes."""
    if fmt == "date-time":
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return ""
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC)
        return moment.strftime("%Y-%m-%dT%H:%M")
    return value[:MAX_TEXT]


def parse(fields: list[dict[str, Any]], data: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A submitted form (a QueryDict: `get`, `getlist`) as the content the server asked for, and
    the errors by field key. Empty optional fields are left out."""
    content: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in fields:
        key, kind = f["key"], f["kind"]
        if kind == "boolean":
            content[f["name"]] = data.get(key) in ("on", "true", "1")
            continue
        if kind == "multi":
            chosen = [v for v in data.getlist(key) if v]
            if chosen or f["required"]:
                content[f["name"]] = chosen
            continue
        raw = str(data.get(key, ""))
        if not raw.strip():
            if f["required"]:
                errors[key] = "This field is required."
            continue
        if kind == "number":
            try:
                number = float(raw)
            except ValueError:
                errors[key] = "Enter a number."
                continue
            if f["type"] == "integer":
                if not number.is_integer():
                    errors[key] = "Enter a whole number."
                    continue
                content[f["name"]] = int(number)
            else:
                content[f["name"]] = int(number) if number.is_integer() and "." not in raw else number
        elif kind == "text" and f["format"] == "date-time":
            try:
                moment = datetime.fromisoformat(raw)
            except ValueError:
                errors[key] = "Enter a date and time."
                continue
            moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
            content[f["name"]] = moment.isoformat().replace("+00:00", "Z")
        else:
            content[f["name"]] = raw
    return content, errors


def check(fields: list[dict[str, Any]], schema: dict[str, Any], content: dict[str, Any]) -> dict[str, str]:
    """The schema's own verdict on `content` (jsonschema, with format checks), by field key."""
    keys = {f["name"]: f["key"] for f in fields}
    errors: dict[str, str] = {}
    # The server's patterns run with a bounded engine and budget (this runs in a web request).
    for error in bounded_schema.errors(checked_schema(schema), content, format_checker=_FORMATS):
        name = str(error.path[0]) if error.path else ""
        if error.validator == "required" and isinstance(error.validator_value, list):
            missing = [n for n in error.validator_value if n not in content]
            for n in missing:
                errors.setdefault(keys.get(n, ""), "This field is required.")
            continue
        errors.setdefault(keys.get(name, ""), _message(error))
    return errors


def checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # Only what describes values: a server's `$ref`s, `$id`s or other keywords have no say here.
    kept = {"type", "enum", "const", "oneOf", "anyOf", "items", "format", "minimum", "maximum"}
    kept |= {"minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "pattern"}
    properties = {
        name: {k: v for k, v in spec.items() if k in kept}
        for name, spec in (schema.get("properties") or {}).items()
        if isinstance(spec, dict)
    }
    return {"type": "object", "properties": properties, "required": list(schema.get("required") or [])}


def _message(error: jsonschema.ValidationError) -> str:
    kind = error.validator
    if isinstance(error, bounded_schema.Unchecked):
        return untrusted.clean_text(error.message, 200)
    if kind == "format":
        return {
            "email": "Enter a valid email address.",
            "uri": "Enter a full address, such as https://example.com/.",
            "date": "Enter a date (YYYY-MM-DD).",
            "date-time": "Enter a date and time.",
        }.get(str(error.validator_value), "This value has the wrong format.")
    if kind in ("minimum", "maximum"):
        return f"Enter a number {'at least' if kind == 'minimum' else 'at most'} {error.validator_value:g}."
    if kind in ("minLength", "maxLength"):
        return f"Use {'at least' if kind == 'minLength' else 'at most'} {error.validator_value} characters."
    if kind in ("minItems", "maxItems"):
        return f"Choose {'at least' if kind == 'minItems' else 'at most'} {error.validator_value}."
    if kind in ("enum", "oneOf", "anyOf", "const"):
        return "Choose one of the options."
    if kind == "pattern":
        return "This value has the wrong format."
    return untrusted.clean_text(error.message, 200)


_EMAIL = EmailValidator()


def _is_email(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        _EMAIL(value)
    except ValidationError:
        return False
    return True


def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme)) and bool(parts.netloc or parts.path)


def _is_date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})", value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return True


# Only these formats are checked; jsonschema's own checkers (and the optional packages some of
# them need) stay out. Registered from a typed table: jsonschema ships no type information, so
# its `checks` decorator would leave the functions untyped.
_FORMAT_CHECKS: dict[str, Callable[[object], bool]] = {
    "email": _is_email,
    "uri": _is_uri,
    "date": _is_date,
    "date-time": _is_date_time,
}
_FORMATS = jsonschema.FormatChecker(formats=())
for _format, _check in _FORMAT_CHECKS.items():
    _FORMATS.checks(_format)(_check)


def link(url: Any) -> tuple[str, str]:
    """A URL-mode page: (url, its domain); raises SchemaRefused unless it is plain http(s)."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        raise SchemaRefused("the URL is missing or too long")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise SchemaRefused("the URL contains spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SchemaRefused("only http and https URLs can be opened")
    if parts.username or parts.password:
        raise SchemaRefused("the URL carries a user name or password")
    try:
        domain = parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise SchemaRefused("the URL's host name is not valid") from None
    return url, domain
