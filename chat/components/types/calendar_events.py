"""calendar_events: an agenda, grouped under a heading per day."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from ..base import DATETIME, NAMES, URL, Component, array_of, day_text, object_of, parse_when, people, text_field

SCHEMA = array_of(
    object_of(
        ["title", "start"],
        title=text_field(300),
        start=DATETIME,
        end=DATETIME,
        location=text_field(200),
        attendees=NAMES,
        url=URL,
    ),
    100,
)


def _event(item: dict[str, Any]) -> dict[str, Any]:
    start, end = parse_when(item["start"]), parse_when(item.get("end"))
    if isinstance(start, datetime):
        time = f"{start:%H:%M}"
        if isinstance(end, datetime):
            time += f" – {end:%H:%M}" if end.date() == start.date() else f" – {day_text(end)}, {end:%H:%M}"
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
        "attendees": people(item.get("attendees", [])),
        "attendee_count": len(item.get("attendees", [])),
        "url": item.get("url"),
    }


def prepare(items: list[dict[str, Any]]) -> dict[str, Any]:
    # Grouped by day in the order given: the model decides the order, we only add headings.
    days: list[dict[str, Any]] = []
    for event in map(_event, items):
        day = event.pop("day")
        if not days or days[-1]["date"] != day:
            label = day_text(day, weekday=True) if day else "Other"
            days.append({"date": day, "label": label, "iso": day.isoformat() if day else "", "events": []})
        days[-1]["events"].append(event)
    return {"days": days, "count": len(items)}


component = Component(
    name="calendar_events",
    description="Calendar events (an agenda): time, title, location and attendees.",
    schema=SCHEMA,
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
    prepare=prepare,
)
