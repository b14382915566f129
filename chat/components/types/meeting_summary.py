"""meeting_summary: a meeting's summary, its decisions and a display-only action-item checklist."""

from __future__ import annotations

from typing import Any

from ..base import BOOLEAN, DATE, DATETIME, NAMES, Component, array_of, initial, object_of, people, text_field, when

SCHEMA = object_of(
    ["summary"],
    title=text_field(200),
    date=DATETIME,
    attendees=NAMES,
    summary=text_field(4000, "what was discussed, in a few sentences"),
    decisions=array_of(text_field(500), 30),
    actionItems=array_of(
        object_of(["text"], text=text_field(500), owner=text_field(120), dueDate=DATE, done=BOOLEAN),
        50,
    ),
)


def prepare(item: dict[str, Any]) -> dict[str, Any]:
    actions = [
        {
            "text": a["text"],
            "owner": a.get("owner", ""),
            "owner_initial": initial(a.get("owner", "")),
            "due": when(a.get("dueDate")),
            "done": bool(a.get("done")),
        }
        for a in item.get("actionItems", [])
    ]
    return {
        "meeting": {
            "title": item.get("title") or "Meeting summary",
            "date": when(item.get("date"), weekday=True),
            "attendees": people(item.get("attendees", []), shown=6),
            "summary": item["summary"],
            "decisions": item.get("decisions", []),
            "actions": actions,
            "actions_done": sum(1 for a in actions if a["done"]),
        }
    }


component = Component(
    name="meeting_summary",
    description="A meeting's summary, decisions and an action-item checklist.",
    schema=SCHEMA,
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
    prepare=prepare,
)
