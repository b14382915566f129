"""Generative UI: cards the model writes into its answer as component blocks.

    :::component{type="task_table"}
    [{"name": "Fix login bug", "status": "IN_PROGRESS", "priority": "HIGH"}]
    :::

Each type in `COMPONENTS` has a JSON schema, a partial under templates/components/, the label
shown while its block is still streaming, and an example. The system prompt's documentation is
generated from this registry (`prompt_documentation`), so what the model is told and what the
code accepts cannot drift apart.

Model data is untrusted. It is validated against the schema, URL fields keep only http(s) links,
and the partials render it with autoescape — nothing here is ever marked safe. The result then
goes through nh3 with an allow-list of exactly what the partials use (not the Markdown one, which
would strip the cards' classes): a second line of defence, and it serialises the HTML the way a
browser does, so a card's DOM reads back as the very string we sent. A block that cannot be
shown (bad JSON, wrong shape, unknown type) renders as its escaped text with a short notice,
never as an error for the whole message. Rendering is a pure function of the block's text, so
the live stream and a reload produce the same HTML.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import nh3
from django.template import Context, Template
from django.template.loader import get_template

OPENER = re.compile(r"^ {0,3}:::component\{(?P<attrs>[^}\n]*)\}[ \t]*$")
CLOSER = re.compile(r"^ {0,3}:::[ \t]*$")
_PENDING = re.compile(r"^ {0,3}:::component(?:\{(?P<attrs>[^}\n]*))?$")
_TYPE_ATTR = re.compile(r"""\btype\s*=\s*(?:"([^"\n]*)"|'([^'\n]*)'|([\w-]+))""")
RAW_DISPLAY_LIMIT = 20_000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Component:
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


# --- Block syntax -------------------------------------------------------------------------------


def opener_type(line: str) -> str | None:
    """The type named by a `:::component{type="…"}` line ("" if it names none); None when the
    line is not an opener."""
    match = OPENER.match(line)
    return None if match is None else _type_from(match.group("attrs"))


def pending_type(line: str) -> str | None:
    """For a line still being written: the type if it may yet become an opener ("" while the
    type is not known yet), else None."""
    match = OPENER.match(line) or _PENDING.match(line)
    return None if match is None else _type_from(match.group("attrs") or "")


def _type_from(attrs: str) -> str:
    match = _TYPE_ATTR.search(attrs)
    return next((group for group in match.groups() if group is not None), "") if match else ""


# --- Parsing ------------------------------------------------------------------------------------


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
    component = COMPONENTS.get(type_name)
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
    schema = COMPONENTS[type_name].schema
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


# --- Rendering ----------------------------------------------------------------------------------


# Everything the partials under templates/components/ use, and nothing else.
_TAGS = {
    "div", "span", "p", "a", "i", "h3", "h4", "ul", "ol", "li", "dl", "dt", "dd", "pre", "code", "time", "meter",
    "article", "section", "table", "caption", "thead", "tbody", "tr", "th", "td", "svg", "path", "rect", "circle",
}  # fmt: skip
_SVG = {
    "width",
    "height",
    "viewBox",
    "fill",
    "stroke",
    "stroke-width",
    "stroke-linecap",
    "stroke-linejoin",
    "focusable",
}
_ATTRIBUTES = {
    "*": {"class", "role"},
    "a": {"href", "target"},
    "time": {"datetime"},
    "meter": {"min", "max", "value"},
    "th": {"scope"},
    "td": {"colspan"},
    "svg": _SVG,
    "path": {"d"},
    "rect": {"x", "y", "width", "height", "rx"},
    "circle": {"cx", "cy", "r"},
}


# The partials' own classes, and nothing the page's chrome uses: a value that reached a class
# attribute (a bug, or a future partial) can never make a card look like one of the page's controls.
_CLASS_TOKEN = re.compile(r"(?:gu-|gen-ui)[\w-]*|is-(?:done|unread|over|near)|sr-only")


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "class":
        return " ".join(token for token in value.split() if _CLASS_TOKEN.fullmatch(token)) or None
    return value


@cache
def _template(name: str) -> Template:
    return get_template(name).template  # type: ignore[no-any-return, attr-defined]


def _render(name: str, context: dict[str, Any]) -> str:
    html = _template(name).render(Context(context, autoescape=True)).strip()
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        attribute_filter=_keep_attribute,
        generic_attribute_prefixes={"aria-", "data-"},
        url_schemes={"http", "https"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


def render(source: str) -> str:
    """A component block's text → the card's HTML (or the block's text with a notice)."""
    parsed = parse(source)
    if not parsed.error:
        component = COMPONENTS[parsed.type]
        try:
            return _render(component.template, {"component": component, **component.prepare(parsed.data)})
        except Exception:
            # A bug here must cost one card, not the whole message (the page renders every block).
            log.exception("component %s failed to render", parsed.type)
            parsed = Parsed(parsed.type, parsed.body, error="it failed to render")
    raw = parsed.body if len(parsed.body) <= RAW_DISPLAY_LIMIT else parsed.body[:RAW_DISPLAY_LIMIT] + "\n…"
    return _render("components/_invalid.html", {"type": parsed.type, "reason": parsed.error, "raw": raw})


def render_placeholder(type_name: str | None) -> str:
    """What the page shows while a block is still being written."""
    return _placeholder(type_name if type_name in COMPONENTS else None)


@cache
def _placeholder(type_name: str | None) -> str:
    component = COMPONENTS.get(type_name or "")
    label = component.placeholder if component else "Building a card…"
    return _render("components/_placeholder.html", {"type": type_name or "", "label": label})


# --- Display helpers (fixed English formats: the same input always gives the same HTML) --------

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _parse_when(value: str | None) -> date | datetime | None:
    if not value:
        return None
    text = value.strip()
    try:
        return date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
    except ValueError:
        return None


def _day_text(day: date, *, weekday: bool = False) -> str:
    text = f"{day.day} {_MONTHS[day.month - 1]} {day.year}"
    return f"{_DAYS[day.weekday()]} {text}" if weekday else text


def _when(value: str | None, *, weekday: bool = False) -> dict[str, str] | None:
    """→ {"text": "15 Feb 2026, 09:30", "iso": "2026-02-15T09:30:00"}; unparseable values are
    shown as written (iso "")."""
    if not value:
        return None
    parsed = _parse_when(value)
    if parsed is None:
        return {"text": value, "iso": ""}
    if isinstance(parsed, datetime):
        return {"text": f"{_day_text(parsed, weekday=weekday)}, {parsed:%H:%M}", "iso": parsed.isoformat()}
    return {"text": _day_text(parsed, weekday=weekday), "iso": parsed.isoformat()}


def _choice(value: str | None, labels: dict[str, str]) -> dict[str, str] | None:
    return {"key": value.lower(), "label": labels[value]} if value in labels else None


def _initial(name: str) -> str:
    return next((c.upper() for c in name if c.isalnum()), "?")


def _people(names: list[str], shown: int = 4) -> str:
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


# --- Schemas ------------------------------------------------------------------------------------


def _text(max_length: int, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "maxLength": max_length}
    if description:
        schema["description"] = description
    return schema


def _enum(values: dict[str, str], description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "enum": list(values)}
    if description:
        schema["description"] = description
    return schema


def _list(items: dict[str, Any], max_items: int, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items, "maxItems": max_items}
    if description:
        schema["description"] = description
    return schema


def _object(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


URL = {"type": "string", "format": "uri", "maxLength": 2000, "description": "http(s) link"}
DATE = _text(40, "ISO date, YYYY-MM-DD")
DATETIME = _text(40, "ISO date-time, YYYY-MM-DDTHH:MM (or a date for all day)")
STATUSES = {
    "TODO": "To do",
    "IN_PROGRESS": "In progress",
    "BLOCKED": "Blocked",
    "DONE": "Done",
    "CANCELLED": "Cancelled",
}
PRIORITIES = {"URGENT": "Urgent", "HIGH": "High", "MEDIUM": "Medium", "LOW": "Low"}
PLATFORMS = {
    "linkedin": ("LinkedIn", 3000),
    "x": ("X", 280),
    "mastodon": ("Mastodon", 500),
    "bluesky": ("Bluesky", 300),
}

_TASK_FIELDS: dict[str, dict[str, Any]] = {
    "name": _text(300, "what the task is"),
    "status": _enum(STATUSES),
    "priority": _enum(PRIORITIES),
    "dueDate": DATE,
    "assignee": _text(120, "who does it"),
}
TASK_TABLE = _list(_object(["name"], **_TASK_FIELDS), 100)
TASK_CARD = _object(
    ["name"],
    **_TASK_FIELDS,
    description=_text(4000),
    project=_text(120),
    tags=_list(_text(40), 12),
    subtasks=_list(_object(["title"], title=_text(300), done={"type": "boolean"}), 50),
    url=URL,
)
CALENDAR_EVENTS = _list(
    _object(
        ["title", "start"],
        title=_text(300),
        start=DATETIME,
        end=DATETIME,
        location=_text(200),
        attendees=_list(_text(120), 100, "names"),
        url=URL,
    ),
    100,
)
EMAIL_SUMMARY = _list(
    _object(
        ["from", "subject"],
        **{"from": _text(200, "sender name or address")},
        subject=_text(300),
        snippet=_text(600, "the first words or a one-line summary"),
        date=DATETIME,
        unread={"type": "boolean"},
        url=URL,
    ),
    100,
)
MEETING_SUMMARY = _object(
    ["summary"],
    title=_text(200),
    date=DATETIME,
    attendees=_list(_text(120), 100, "names"),
    summary=_text(4000, "what was discussed, in a few sentences"),
    decisions=_list(_text(500), 30),
    actionItems=_list(
        _object(["text"], text=_text(500), owner=_text(120), dueDate=DATE, done={"type": "boolean"}),
        50,
    ),
)
SOCIAL_POST = _object(
    ["platform", "author", "text"],
    platform={"type": "string", "enum": list(PLATFORMS)},
    author=_text(120, "display name"),
    handle=_text(120, "e.g. @jane"),
    text=_text(20_000, "the post itself, plain text"),
    url=URL,
)


# --- View models --------------------------------------------------------------------------------


def _task(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": item["name"],
        "status": _choice(item.get("status"), STATUSES),
        "priority": _choice(item.get("priority"), PRIORITIES),
        "due": _when(item.get("dueDate")),
        "assignee": item.get("assignee", ""),
        "assignee_initial": _initial(item.get("assignee", "")),
    }


def _prepare_task_table(items: list[dict[str, Any]]) -> dict[str, Any]:
    tasks = [_task(item) for item in items]
    keys = [task["status"]["key"] for task in tasks if task["status"]]
    summary = [{"label": label, "count": keys.count(key.lower())} for key, label in STATUSES.items()]
    return {"tasks": tasks, "summary": [s for s in summary if s["count"]]}


def _prepare_task_card(item: dict[str, Any]) -> dict[str, Any]:
    subtasks = [{"title": s["title"], "done": bool(s.get("done"))} for s in item.get("subtasks", [])]
    return {
        "task": {
            **_task(item),
            "description": item.get("description", ""),
            "project": item.get("project", ""),
            "tags": item.get("tags", []),
            "subtasks": subtasks,
            "subtasks_done": sum(1 for s in subtasks if s["done"]),
            "url": item.get("url"),
        }
    }


def _event(item: dict[str, Any]) -> dict[str, Any]:
    start, end = _parse_when(item["start"]), _parse_when(item.get("end"))
    if isinstance(start, datetime):
        time = f"{start:%H:%M}"
        if isinstance(end, datetime):
            time += f" – {end:%H:%M}" if end.date() == start.date() else f" – {_day_text(end)}, {end:%H:%M}"
    elif isinstance(start, date):
        time = "All day"
    else:
        time = item["start"]
    return {
        "title": item["title"],
        "time": time,
        "iso": start.isoformat() if start else "",
        "day": start.date() if isinstance(start, datetime) else start,
        "location": item.get("location", ""),
        "attendees": _people(item.get("attendees", [])),
        "attendee_count": len(item.get("attendees", [])),
        "url": item.get("url"),
    }


def _prepare_calendar_events(items: list[dict[str, Any]]) -> dict[str, Any]:
    # Grouped by day in the order given: the model decides the order, we only add headings.
    days: list[dict[str, Any]] = []
    for event in map(_event, items):
        day = event.pop("day")
        if not days or days[-1]["date"] != day:
            label = _day_text(day, weekday=True) if day else "Other"
            days.append({"date": day, "label": label, "iso": day.isoformat() if day else "", "events": []})
        days[-1]["events"].append(event)
    return {"days": days, "count": len(items)}


def _prepare_email_summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    emails = [
        {
            "sender": item["from"],
            "initial": _initial(item["from"]),
            "subject": item["subject"],
            "snippet": item.get("snippet", ""),
            "date": _when(item.get("date")),
            "unread": bool(item.get("unread")),
            "url": item.get("url"),
        }
        for item in items
    ]
    return {"emails": emails, "unread": sum(1 for e in emails if e["unread"])}


def _prepare_meeting_summary(item: dict[str, Any]) -> dict[str, Any]:
    actions = [
        {
            "text": a["text"],
            "owner": a.get("owner", ""),
            "owner_initial": _initial(a.get("owner", "")),
            "due": _when(a.get("dueDate")),
            "done": bool(a.get("done")),
        }
        for a in item.get("actionItems", [])
    ]
    return {
        "meeting": {
            "title": item.get("title") or "Meeting summary",
            "date": _when(item.get("date"), weekday=True),
            "attendees": _people(item.get("attendees", []), shown=6),
            "summary": item["summary"],
            "decisions": item.get("decisions", []),
            "actions": actions,
            "actions_done": sum(1 for a in actions if a["done"]),
        }
    }


def _prepare_social_post(item: dict[str, Any]) -> dict[str, Any]:
    label, limit = PLATFORMS[item["platform"]]
    count = len(item["text"])
    return {
        "post": {
            "platform": item["platform"],
            "platform_label": label,
            "author": item["author"],
            "handle": item.get("handle", ""),
            "initial": _initial(item["author"]),
            "text": item["text"],
            "count": count,
            "limit": limit,
            "over": max(0, count - limit),
            "near": count > limit * 0.9,
            "percent": min(100, round(count * 100 / limit)),
            "url": item.get("url"),
        }
    }


# --- The registry -------------------------------------------------------------------------------

_REGISTRY = [
    Component(
        name="task_table",
        description="Several tasks as a table: status, priority, due date and assignee.",
        schema=TASK_TABLE,
        template="components/task_table.html",
        label="task table",
        example=[
            {
                "name": "Fix login bug",
                "status": "IN_PROGRESS",
                "priority": "HIGH",
                "dueDate": "2026-02-15",
                "assignee": "John",
            },
            {
                "name": "Write release notes",
                "status": "TODO",
                "priority": "MEDIUM",
                "dueDate": "2026-02-18",
                "assignee": "Ana",
            },
        ],
        prepare=_prepare_task_table,
    ),
    Component(
        name="task_card",
        description="One task in detail, with its description, subtasks and tags.",
        schema=TASK_CARD,
        template="components/task_card.html",
        label="task card",
        example={
            "name": "Fix login bug",
            "status": "IN_PROGRESS",
            "priority": "HIGH",
            "dueDate": "2026-02-15",
            "assignee": "John",
            "project": "Web app",
            "description": "Users with SSO accounts get a 500 after the redirect.",
            "tags": ["auth", "bug"],
            "subtasks": [{"title": "Reproduce", "done": True}, {"title": "Patch the callback", "done": False}],
            "url": "https://tracker.example.com/WEB-142",
        },
        prepare=_prepare_task_card,
    ),
    Component(
        name="calendar_events",
        description="Calendar events (an agenda): time, title, location and attendees.",
        schema=CALENDAR_EVENTS,
        template="components/calendar_events.html",
        label="calendar",
        example=[
            {
                "title": "Design review",
                "start": "2026-02-16T10:00",
                "end": "2026-02-16T10:45",
                "location": "Room 4",
                "attendees": ["Ana", "John"],
            }
        ],
        prepare=_prepare_calendar_events,
    ),
    Component(
        name="email_summary",
        description="A list of emails: sender, subject, a snippet, date and whether it is unread.",
        schema=EMAIL_SUMMARY,
        template="components/email_summary.html",
        label="email summary",
        example=[
            {
                "from": "Ana Lima",
                "subject": "Q1 roadmap",
                "snippet": "Here is the draft we discussed…",
                "date": "2026-02-14T09:12",
                "unread": True,
            }
        ],
        prepare=_prepare_email_summary,
    ),
    Component(
        name="meeting_summary",
        description="A meeting's summary, decisions and an action-item checklist.",
        schema=MEETING_SUMMARY,
        template="components/meeting_summary.html",
        label="meeting summary",
        example={
            "title": "Sprint planning",
            "date": "2026-02-16T10:00",
            "attendees": ["Ana", "John"],
            "summary": "We agreed on the sprint goal: ship SSO login.",
            "decisions": ["Release on 27 February"],
            "actionItems": [{"text": "Draft release notes", "owner": "Ana", "dueDate": "2026-02-20", "done": False}],
        },
        prepare=_prepare_meeting_summary,
    ),
    Component(
        name="social_post",
        description="A draft social media post, previewed for its platform with a character count.",
        schema=SOCIAL_POST,
        template="components/social_post.html",
        label="post preview",
        example={"platform": "linkedin", "author": "Ana Lima", "text": "We just shipped SSO login! 🎉"},
        prepare=_prepare_social_post,
    ),
]
COMPONENTS: dict[str, Component] = {c.name: c for c in _REGISTRY}


# --- The system prompt's documentation ----------------------------------------------------------


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
    for component in _REGISTRY:
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
