"""Reading schedules: cron lines and RRULEs in a time zone, answered in UTC, with clear errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from automations.schedule import ScheduleError, parse

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 28, 10, 0, 30, tzinfo=UTC)  # a Saturday


def test_every_minute() -> None:
    s = parse("* * * * *", "UTC", ANCHOR)
    assert s.after(NOW) == datetime(2026, 11, 28, 10, 1, tzinfo=UTC)
    assert s.between(NOW - timedelta(minutes=2), NOW) == [
        datetime(2026, 11, 28, 9, 59, tzinfo=UTC),
        datetime(2026, 11, 28, 10, 0, tzinfo=UTC),
    ]


def test_weekdays_at_eight_in_paris_keep_local_time() -> None:
    slots = parse("0 8 * * mon-fri", "Europe/Paris", ANCHOR).upcoming(NOW, 2)
    # Monday 30 November, 8:00 in Paris (UTC+1).
    assert slots == [datetime(2026, 11, 30, 7, tzinfo=UTC), datetime(2026, 12, 1, 7, tzinfo=UTC)]
    summer = parse("0 8 * * *", "Europe/Paris", ANCHOR).after(datetime(2027, 7, 1, tzinfo=UTC))
    assert summer == datetime(2027, 7, 1, 6, tzinfo=UTC)  # UTC+2 in summer


def test_both_day_fields_match_either_as_in_cron() -> None:
    slots = parse("0 0 13 * 5", "UTC", ANCHOR).upcoming(NOW, 3)
    assert [s.day for s in slots] == [4, 11, 13]


def test_rrule_in_a_zone() -> None:
    s = parse("RRULE:FREQ=DAILY;BYHOUR=8;BYMINUTE=30", "America/New_York", ANCHOR)
    assert s.after(NOW) == datetime(2026, 11, 28, 13, 30, tzinfo=UTC)
    assert s.shortest_gap(NOW) == timedelta(days=1)


@pytest.mark.parametrize(
    ("text", "zone", "message"),
    [
        ("* * *", "UTC", "five fields"),
        ("61 * * * *", "UTC", "from 0 to 59"),
        ("5-1 * * * *", "UTC", "runs backwards"),
        ("*/0 * * * *", "UTC", "1 or more"),
        ("FREQ=SOMETIMES", "UTC", "cannot be read"),
        ("FREQ=SECONDLY", "UTC", "every second"),
        ("* * * * *", "Mars/Olympus", "not a time zone"),
        ("", "UTC", "Give a schedule"),
    ],
)
def test_unreadable_schedules_say_why(text: str, zone: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        parse(text, zone, ANCHOR)
