"""Text and card helpers the demo model's answers share: quoting, numbers, place names, short
summaries, and the component blocks (task tables, calendar events, email and meeting cards,
post drafts) its answers carry."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

# --- small formatting helpers ----------------------------------------------


def tool_suffix(name: str) -> str:
    return name.rsplit("__", 1)[-1]


def _quote(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat


def _blockquote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _inline_code(text: str) -> str:
    # A backtick inside would end the code span early and spill raw text into the answer.
    return f"`{text.replace('`', "'")}`"


def _link_text(text: str) -> str:
    return re.sub(r"([\[\]])", r"\\\1", " ".join(text.split()))


def _is_web_url(value: object) -> bool:
    # Only http(s) links become clickable: a "javascript:" URL from a tool must stay inert text.
    return isinstance(value, str) and re.match(r"https?://", value, re.IGNORECASE) is not None


def _join_phrases(phrases: Sequence[str]) -> str:
    if len(phrases) == 1:
        sentence = phrases[0]
    elif len(phrases) == 2:
        sentence = f"{phrases[0]}, and {phrases[1]}"
    else:
        sentence = ", ".join(phrases[:-1]) + f", and {phrases[-1]}"
    if sentence[:1].isalpha():
        sentence = sentence[0].upper() + sentence[1:]
    return sentence + "."


def _format_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def pretty_expression(expression: str) -> str:
    """'12*7' -> '12 × 7': spaced operators read better in a chat answer."""
    symbols = {"*": "×", "/": "÷", "+": "+", "-": "-", "^": "^", "%": "mod", "**": "^"}
    # An operator counts as binary only after an operand; "-3" keeps its sign glued on.
    return re.sub(
        r"(?<=[\d.)])\s*(\*\*|[-+*/^%])\s*",
        lambda m: f" {symbols[m.group(1)]} ",
        expression,
    )


def place_name(timezone: str) -> str:
    """'America/New_York' -> 'New York'."""
    return timezone.rsplit("/", 1)[-1].replace("_", " ")


def summarize_json(value: Any, limit: int = 200) -> str:
    """A one-line view of an unknown result, short enough to sit inside a sentence."""
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if isinstance(item, dict | list):
                shown = f"[{len(item)} items]" if isinstance(item, list) else "{…}"
            else:
                shown = json.dumps(item, ensure_ascii=False)
            parts.append(f"{key}: {shown}")
        text = ", ".join(parts)
    elif isinstance(value, list):
        text = f"a list of {len(value)} items"
    else:
        text = json.dumps(value, ensure_ascii=False)
    return _quote(text, limit)


def first_sentences(text: str, count: int = 2, limit: int = 400) -> str:
    flat = " ".join(text.split())
    sentences = re.split(r"(?<=[.!?])\s+", flat)
    return _quote(" ".join(sentences[:count]), limit)


def _sender_name(sender: Any) -> str:
    if isinstance(sender, dict):
        return str(sender.get("name") or sender.get("email") or "")
    return str(sender or "")


# --- generative UI components --------------------------------------------------
#
# A component is a fenced block the chat UI renders as a widget:
#
#     :::component{type="task_table"}
#     [{"name":"Fix login bug",...}]
#     :::
#
# The JSON sits on one line, so no line inside a block can close it early. Each
# component's fields are decided by exactly one function below, to keep them easy to
# line up with the renderer.

_TASK_FIELDS = ("id", "name", "status", "priority", "dueDate", "assignee", "project", "updatedAt")


def component_block(kind: str, data: Any) -> str:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f':::component{{type="{kind}"}}\n{payload}\n:::'


def task_table_component(tasks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: task.get(key) for key in _TASK_FIELDS} for task in tasks]


def task_card_component(task: dict[str, Any]) -> dict[str, Any]:
    card = {key: task.get(key) for key in _TASK_FIELDS}
    if task.get("description"):
        card["description"] = task["description"]
    return card


def calendar_events_component(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "title": event.get("title"),
            "start": event.get("start"),
            "end": event.get("end"),
            "attendees": list(event.get("attendees") or []),
            "location": event.get("location") or "",
        }
        for event in events
    ]


def email_summary_component(emails: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "from": _sender_name(email.get("sender")),
            "subject": email.get("subject"),
            "snippet": email.get("snippet"),
            "date": email.get("receivedAt"),
            "unread": bool(email.get("unread")),
        }
        for email in emails
    ]


def meeting_summary_component(meeting: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": meeting.get("title"),
        "date": meeting.get("date") or str(meeting.get("start") or "")[:10] or None,
        "attendees": list(meeting.get("attendees") or []),
        "summary": meeting.get("summary") or "",
        "actionItems": [
            {"text": item.get("text"), "owner": item.get("owner"), "done": bool(item.get("done"))}
            for item in meeting.get("actionItems") or ()
            if isinstance(item, dict)
        ],
    }


def social_post_component(post: dict[str, Any]) -> dict[str, Any]:
    # The workspace does not know the user's display name, and the card wants one.
    return {"platform": post.get("platform"), "author": "You", "text": post.get("text")}
