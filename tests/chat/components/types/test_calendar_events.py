from __future__ import annotations

from chat.components import render

from ..helpers import block


def test_calendar_groups_events_by_day_with_times() -> None:
    events = [
        {
            "title": "Standup",
            "start": "2026-02-16T09:30",
            "end": "2026-02-16T09:45",
            "attendees": ["A", "B", "C", "D", "E"],
        },
        {"title": "Offsite", "start": "2026-02-17"},
        {"title": "Someday", "start": "next week"},
    ]

    html = render(block("calendar_events", events))

    assert '<time datetime="2026-02-16">Mon 16 Feb 2026</time>' in html
    assert '<time datetime="2026-02-16T09:30:00">09:30 – 09:45</time>' in html
    assert "A, B, C, D and 1 more" in html
    assert "All day" in html
    assert "Other" in html and "next week" in html
