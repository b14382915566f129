"""Spend over time, for admins: the `Spend` ledger summed per day or calendar month (UTC), split
per user, group or model, as a stacked bar chart drawn on the server (SVG, no script) with the
same numbers as a table beside it.

The form is the page's query string, so a chart is a link an admin can keep. A call of a user in
two groups counts in both groups' bars, as it counts against both groups' budgets.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import F, QuerySet, Sum
from django.db.models.functions import TruncDay, TruncMonth
from django.http import HttpResponse
from django.utils import timezone

from chat.models import Spend

# Most series drawn; the rest are summed as "Others" (a chart of 200 colours says nothing).
MAX_SERIES = 8
# Most bars: a year of days, ten years of months.
MAX_BUCKETS = {"day": 366, "month": 120}
# Okabe-Ito: told apart by people with any common colour vision, on light and dark themes.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#8C6BB1"]
OTHERS_COLOUR = "#9E9E9E"
NO_GROUP = "(in no group)"

# The dates a period may start and end at (far enough from the calendar's ends that a month
# or a day before or after them exists).
EARLIEST, LATEST = date(1970, 1, 1), date(9998, 12, 31)

# The drawing, in SVG units (it scales to the page's width).
WIDTH, HEIGHT = 960, 320
LEFT, RIGHT, TOP, BOTTOM = 84, 16, 16, 44
MAX_X_LABELS = 12


class ChartForm(forms.Form):
    by = forms.ChoiceField(
        label="Split by", choices=[("user", "User"), ("group", "Group"), ("model", "Model")], initial="user"
    )
    granularity = forms.ChoiceField(
        label="Per", choices=[("day", "Day"), ("month", "Month")], initial="day", required=False
    )
    metric = forms.ChoiceField(
        label="Show", choices=[("cost", "Cost (USD)"), ("tokens", "Tokens")], initial="cost", required=False
    )
    user = forms.ModelChoiceField(queryset=get_user_model().objects.order_by("username"), required=False)
    group = forms.ModelChoiceField(queryset=Group.objects.order_by("name"), required=False)
    model = forms.ChoiceField(label="Model", required=False)
    start = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Spend.objects.order_by("model_name").values_list("model_name", flat=True).distinct()
        self.fields["model"].choices = [("", "All models"), *((name, name) for name in names)]  # type: ignore[attr-defined]
        self.fields["user"].empty_label = "All users"  # type: ignore[attr-defined]
        self.fields["group"].empty_label = "All groups"  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        granularity = data.get("granularity") or "day"
        data["granularity"] = granularity
        data["metric"] = data.get("metric") or "cost"
        today = timezone.now().astimezone(UTC).date()
        for name in ("start", "end"):
            chosen = data.get(name)
            if chosen is not None and not EARLIEST <= chosen <= LATEST:
                raise forms.ValidationError(f"Choose dates between {EARLIEST:%Y} and {LATEST:%Y}.")
        end = data.get("end") or today
        start = data.get("start") or _default_start(granularity, end)
        if start > end:
            raise forms.ValidationError("“From” must not be after “To”.")
        if len(_buckets(granularity, start, end)) > MAX_BUCKETS[granularity]:
            unit = "days" if granularity == "day" else "months"
            raise forms.ValidationError(
                f"At most {MAX_BUCKETS[granularity]} {unit} at a time: choose a shorter period"
                + (" or show it per month." if granularity == "day" else ".")
            )
        data["start"], data["end"] = start, end
        return data


def _default_start(granularity: str, end: date) -> date:
    if granularity == "day":
        return end - timedelta(days=29)
    month = end.year * 12 + end.month - 1 - 11  # twelve months, this one included
    return date(month // 12, month % 12 + 1, 1)


def _bucket_start(granularity: str, day: date) -> date:
    return day if granularity == "day" else day.replace(day=1)


def _buckets(granularity: str, start: date, end: date) -> list[date]:
    found, current = [], _bucket_start(granularity, start)
    while current <= end:
        found.append(current)
        if len(found) > MAX_BUCKETS[granularity]:
            break
        current = current + timedelta(days=1) if granularity == "day" else (current + timedelta(days=32)).replace(day=1)
    return found


@dataclass
class Series:
    name: str
    colour: str
    values: list[Decimal]
    total: Decimal = Decimal(0)


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    title: str


@dataclass
class Chart:
    """Everything the template draws: bars, axes, legend and the table's rows."""

    by: str
    granularity: str
    metric: str
    start: date
    end: date
    labels: list[str]
    series: list[Series]
    totals: list[Decimal]
    bars: list[Bar] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_labels: list[tuple[float, str]] = field(default_factory=list)
    grand_total: Decimal = Decimal(0)

    @property
    def empty(self) -> bool:
        return not self.series

    @property
    def unit(self) -> str:
        return "USD" if self.metric == "cost" else "tokens"

    @property
    def summary(self) -> str:
        """One sentence for screen readers (the chart's description)."""
        per = "day" if self.granularity == "day" else "month"
        what = "Spending in USD" if self.metric == "cost" else "Tokens used"
        split = {"user": "user", "group": "group", "model": "model"}[self.by]
        if self.empty:
            return f"{what} per {per} from {self.start:%-d %B %Y} to {self.end:%-d %B %Y}: nothing was spent."
        biggest = max(self.series, key=lambda s: s.total)
        return (
            f"{what} per {per}, split by {split}, from {self.start:%-d %B %Y} to {self.end:%-d %B %Y}: "
            f"{fmt(self.grand_total, self.metric)} in all; the most by {biggest.name} "
            f"({fmt(biggest.total, self.metric)}). The table below has every value."
        )

    @property
    def rows(self) -> list[tuple[str, list[str], str]]:
        """The table: one row per day or month, a column per series, and the total."""
        return [
            (label, [fmt(s.values[i], self.metric) for s in self.series], fmt(self.totals[i], self.metric))
            for i, label in enumerate(self.labels)
        ]

    @property
    def footer(self) -> tuple[list[str], str]:
        return [fmt(s.total, self.metric) for s in self.series], fmt(self.grand_total, self.metric)

    @property
    def plot(self) -> dict[str, int]:
        return {"left": LEFT, "right": WIDTH - RIGHT, "top": TOP, "bottom": HEIGHT - BOTTOM}


def fmt(value: Decimal, metric: str) -> str:
    if metric == "tokens":
        return f"{int(value):,}"
    if value and abs(value) < Decimal("0.01"):
        return f"${value:,.4f}"
    return f"${value:,.2f}"


def rows_for(data: dict[str, Any]) -> QuerySet[Spend]:
    start = datetime.combine(data["start"], time.min, tzinfo=UTC)
    end = datetime.combine(data["end"] + timedelta(days=1), time.min, tzinfo=UTC)
    rows = Spend.objects.filter(created_at__gte=start, created_at__lt=end)
    if data.get("user"):
        rows = rows.filter(user=data["user"])
    if data.get("group"):
        rows = rows.filter(user__groups=data["group"])
    if data.get("model"):
        rows = rows.filter(model_name=data["model"])
    return rows


def build(data: dict[str, Any]) -> Chart:
    granularity, metric, by = data["granularity"], data["metric"], data["by"]
    buckets = _buckets(granularity, data["start"], data["end"])
    index = {bucket: i for i, bucket in enumerate(buckets)}
    trunc = TruncDay if granularity == "day" else TruncMonth
    key = {"user": "user__username", "group": "user__groups__name", "model": "model_name"}[by]
    amount = Sum("cost") if metric == "cost" else Sum(F("prompt_tokens") + F("completion_tokens"))
    grouped = (
        rows_for(data)
        .annotate(bucket=trunc("created_at", tzinfo=UTC))
        .values("bucket", key)
        .annotate(amount=amount)
        .order_by()
    )
    per_key: dict[str, list[Decimal]] = {}
    for row in grouped:
        name = row[key] if row[key] is not None else NO_GROUP
        if by == "group" and data.get("group") and name != data["group"].name:
            continue  # the chosen group's members' other groups are not asked about
        when = row["bucket"]
        bucket = (when.date() if isinstance(when, datetime) else when) if when else None
        if bucket not in index:
            continue
        values = per_key.setdefault(str(name), [Decimal(0)] * len(buckets))
        values[index[bucket]] += Decimal(row["amount"] or 0)
    ranked = sorted(per_key.items(), key=lambda item: (-sum(item[1]), item[0]))
    series = [Series(name, PALETTE[i], values) for i, (name, values) in enumerate(ranked[:MAX_SERIES])]
    if len(ranked) > MAX_SERIES:
        rest = [sum((values[i] for _, values in ranked[MAX_SERIES:]), Decimal(0)) for i in range(len(buckets))]
        series.append(Series(f"Others ({len(ranked) - MAX_SERIES})", OTHERS_COLOUR, rest))
    for s in series:
        s.total = sum(s.values, Decimal(0))
    totals = [sum((s.values[i] for s in series), Decimal(0)) for i in range(len(buckets))]
    labels = [f"{b:%-d %b %Y}" if granularity == "day" else f"{b:%B %Y}" for b in buckets]
    chart = Chart(by, granularity, metric, data["start"], data["end"], labels, series, totals)
    chart.grand_total = sum(totals, Decimal(0))
    _draw(chart, buckets)
    return chart


def _nice_step(top: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) giving about four grid lines up to `top`."""
    if top <= 0:
        return 1.0
    raw = top / 4
    power = 10 ** _floor_log10(raw)
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * power:
            return multiple * power
    return 10 * power


def _floor_log10(value: float) -> int:
    exponent = 0
    while value >= 10:
        value /= 10
        exponent += 1
    while value < 1:
        value *= 10
        exponent -= 1
    return exponent


def _draw(chart: Chart, buckets: list[date]) -> None:
    top_value = float(max(chart.totals, default=0))
    step = _nice_step(top_value)
    ticks = max(1, int(-(-top_value // step)))
    scale_top = step * ticks
    plot_height = HEIGHT - TOP - BOTTOM
    plot_width = WIDTH - LEFT - RIGHT
    for n in range(ticks + 1):
        value = step * n
        y = HEIGHT - BOTTOM - plot_height * n / ticks
        label = fmt(Decimal(str(value)), chart.metric) if chart.metric == "cost" else _short(value)
        chart.y_ticks.append((round(y, 2), label))
    slot = plot_width / max(1, len(buckets))
    width = max(1.0, slot * 0.72)
    for i, label in enumerate(chart.labels):
        x = LEFT + slot * i + (slot - width) / 2
        base = float(HEIGHT - BOTTOM)
        for s in chart.series:
            value = float(s.values[i])
            if value <= 0:
                continue
            height = plot_height * value / scale_top
            base -= height
            title = f"{label}, {s.name}: {fmt(s.values[i], chart.metric)}"
            chart.bars.append(Bar(round(x, 2), round(base, 2), round(width, 2), round(height, 2), s.colour, title))
    every = max(1, -(-len(buckets) // MAX_X_LABELS))
    for i in range(0, len(buckets), every):
        short = f"{buckets[i]:%-d %b}" if chart.granularity == "day" else f"{buckets[i]:%b %Y}"
        chart.x_labels.append((round(LEFT + slot * i + slot / 2, 2), short))


def _short(value: float) -> str:
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def as_csv(chart: Chart) -> HttpResponse:
    """The table as CSV (the numbers unformatted)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="tessera-spend-{chart.by}-{chart.granularity}-{chart.start}-{chart.end}.csv"'
    )
    writer = csv.writer(response)
    writer.writerow([chart.granularity, *(csv_safe(s.name) for s in chart.series), f"total ({chart.unit})"])
    for i, label in enumerate(chart.labels):
        writer.writerow([label, *(s.values[i] for s in chart.series), chart.totals[i]])
    return response


def csv_safe(value: str) -> str:
    # A cell starting with = + - @ (or a tab or return) is a formula to a spreadsheet: quote it as text.
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value
