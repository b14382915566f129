"""When an automation runs: a five-field cron line or an RFC 5545 RRULE, read in an IANA time
zone. Both become dateutil rules walked in the zone's wall-clock time (so "8:00 every weekday"
stays 8:00 across daylight-saving changes) and are answered in UTC.

Cron: minute hour day-of-month month day-of-week; `*`, `a-b`, `*/n`, `a-b/n`, lists, month and
day names (jan, mon); day-of-week 0 and 7 are Sunday. As in cron, when both day fields are
restricted a day matching either one runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil import rrule

MONTHS = {
    name: i
    for i, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1
    )
}
DAYS = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# cron's day numbers (0 = Sunday) to dateutil's weekdays (0 = Monday)
_WEEKDAY = {0: rrule.SU, 1: rrule.MO, 2: rrule.TU, 3: rrule.WE, 4: rrule.TH, 5: rrule.FR, 6: rrule.SA, 7: rrule.SU}
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)


class ScheduleError(ValueError):
    """A schedule that cannot be read; the message says what to change."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"“{name}” is not a time zone name (for example Europe/Paris or UTC).") from None


def _number(text: str, low: int, high: int, names: dict[str, int], field: str) -> int:
    value = names.get(text.lower()) if not text.isdigit() else int(text)
    if value is None or not low <= value <= high:
        raise ScheduleError(f"The {field} field has “{text}”: use a number from {low} to {high}.")
    return value


def _field(text: str, low: int, high: int, names: dict[str, int], field: str) -> list[int] | None:
    """The values a cron field allows; None for `*` (any)."""
    if text == "*":
        return None
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ScheduleError(f"The {field} field has the step “{step_text}”: use a whole number of 1 or more.")
            step = int(step_text)
        if span == "*":
            start, end = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            start, end = _number(a, low, high, names, field), _number(b, low, high, names, field)
            if start > end:
                raise ScheduleError(f"The {field} field has the range “{span}”, which runs backwards.")
        else:
            start = _number(span, low, high, names, field)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return sorted(values)


def _cron(text: str, anchor: datetime) -> rrule.rruleset:
    parts = text.split()
    if len(parts) != 5:
        raise ScheduleError("A cron line has five fields: minute hour day-of-month month day-of-week.")
    read = (_field(p, lo, hi, names, f) for p, (f, lo, hi, names) in zip(parts, FIELDS, strict=True))
    minute, hour, dom, month, dow = read
    common = {"byminute": minute, "byhour": hour, "bymonth": month, "bysecond": 0, "dtstart": anchor, "cache": True}
    days = sorted({_WEEKDAY[d] for d in dow}, key=lambda d: d.weekday) if dow is not None else None
    rules = rrule.rruleset()
    if dom is not None and days is not None:  # cron's rule: either day field matches
        rules.rrule(rrule.rrule(rrule.MINUTELY, bymonthday=dom, **common))
        rules.rrule(rrule.rrule(rrule.MINUTELY, byweekday=days, **common))
    else:
        rules.rrule(rrule.rrule(rrule.MINUTELY, bymonthday=dom, byweekday=days, **common))
    return rules


def _rrule(text: str, anchor: datetime) -> rrule.rrule | rrule.rruleset:
    body = text.strip()
    if body.upper().startswith("RRULE:"):
        body = body[6:]
    if "FREQ=SECONDLY" in body.upper().replace(" ", ""):
        raise ScheduleError("An RRULE may not repeat every second.")
    try:
        parsed = rrule.rrulestr(body, dtstart=anchor, cache=True)
    except (ValueError, TypeError) as exc:
        raise ScheduleError(f"This RRULE cannot be read: {exc}.") from None
    return parsed


type Rules = rrule.rrule | rrule.rruleset


@dataclass
class Schedule:
    """`rules_for(start)`: the rule walked from a local wall-clock `start`. A cron line starts
    anywhere (its slots do not depend on where it starts), so it is walked from just before
    the moment asked about, never from its creation; an RRULE counts from its anchor."""

    rules_for: Callable[[datetime], Rules]
    tz: ZoneInfo

    def _local(self, moment: datetime) -> datetime:
        return moment.astimezone(self.tz).replace(tzinfo=None)

    def _utc(self, local: datetime) -> datetime:
        return local.replace(tzinfo=self.tz).astimezone(UTC)

    def after(self, moment: datetime) -> datetime | None:
        """The first slot strictly after `moment` (UTC), or None if the rule has ended."""
        local = self._local(moment)
        rules = self.rules_for(local)
        found = rules.after(local, inc=False)
        # A wall-clock time that a daylight-saving change skips or repeats maps back at or
        # before `moment`: step on.
        while found is not None and self._utc(found) <= moment:
            found = rules.after(found, inc=False)
        return self._utc(found) if found is not None else None

    def between(self, start: datetime, end: datetime) -> list[datetime]:
        """Slots in [start, end] (UTC)."""
        low = self._local(start) - timedelta(hours=3)
        slots = self.rules_for(low).between(low, self._local(end) + timedelta(hours=3), inc=True)
        return [s for s in (self._utc(x) for x in slots) if start <= s <= end]

    def upcoming(self, moment: datetime, count: int) -> list[datetime]:
        slots: list[datetime] = []
        while len(slots) < count:
            nxt = self.after(slots[-1] if slots else moment)
            if nxt is None:
                break
            slots.append(nxt)
        return slots

    def shortest_gap(self, moment: datetime, count: int = 30) -> timedelta | None:
        slots = self.upcoming(moment, count)
        gaps = [b - a for a, b in pairwise(slots)]
        return min(gaps) if gaps else None


def parse(text: str, tz_name: str, anchor: datetime) -> Schedule:
    """`anchor` (UTC): where an RRULE without its own DTSTART counts its intervals from (the
    automation's creation), so "every 2 hours" keeps the same hours from day to day."""
    tz = zone(tz_name)
    text = (text or "").strip()
    if not text:
        raise ScheduleError("Give a schedule: a cron line such as “0 8 * * 1-5”, or an RRULE.")
    local_anchor = anchor.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    if "FREQ=" in text.upper():
        fixed = _rrule(text, local_anchor)
        return Schedule(lambda _start: fixed, tz)
    _cron(text, local_anchor)  # read once here, so a bad line is refused when it is saved

    def cron_from(start: datetime) -> Rules:
        return _cron(text, start.replace(second=0, microsecond=0) - timedelta(minutes=1))

    return Schedule(cron_from, tz)
