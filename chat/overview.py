"""The staff's operations overview in the admin: the last 24 hours at a glance.

A fixed handful of aggregate queries (no per-row queries, whatever the traffic): turns by
outcome, tokens by user and model, the slowest and the most failing tools, the workers with a
recent heartbeat, and the tools' circuit breakers.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.db.models import Avg, Count, F, Max, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from chat.models import Message, Turn
from core import health
from toolsets.models import ToolExecution

WINDOW = timedelta(hours=24)
ROWS = 10


def _outcomes(since: Any) -> list[dict[str, Any]]:
    counts = dict(Turn.objects.filter(created_at__gte=since).values_list("status").annotate(n=Count("id")).order_by())
    total = sum(counts.values())
    return [
        {
            "status": status.value,
            "label": status.label,
            "count": counts.get(status.value, 0),
            "share": round(100 * counts.get(status.value, 0) / total) if total else 0,
        }
        for status in Turn.Status
    ]


def _tokens(since: Any) -> list[dict[str, Any]]:
    rows = (
        Message.objects.filter(role=Message.Role.ASSISTANT, created_at__gte=since, turn__isnull=False)
        .values(user=F("chat__owner__username"), model=F("turn__model__name"))
        .annotate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), calls=Count("id"))
        .order_by()
    )
    found: list[dict[str, Any]] = []
    for row in rows:
        prompt, completion = int(row["prompt"] or 0), int(row["completion"] or 0)
        if prompt or completion:
            found.append({**row, "prompt": prompt, "completion": completion, "total": prompt + completion})
    return sorted(found, key=lambda row: -int(row["total"]))[:ROWS]


def _tools(since: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    recent = ToolExecution.objects.filter(started_at__gte=since)
    slowest: list[dict[str, Any]] = [
        dict(row)
        for row in recent.filter(duration_ms__isnull=False)
        .values("toolset", "tool")
        .annotate(calls=Count("id"), avg_ms=Avg("duration_ms"), max_ms=Max("duration_ms"))
        .order_by("-avg_ms", "toolset", "tool")[:ROWS]
    ]
    failing: list[dict[str, Any]] = [
        dict(row)
        for row in recent.values("toolset", "tool")
        .annotate(calls=Count("id"), errors=Count("id", filter=Q(status=ToolExecution.Status.ERROR)))
        .filter(errors__gt=0)
        .order_by("-errors", "toolset", "tool")[:ROWS]
    ]
    # The commonest error of each failing tool, from one more grouped query.
    kinds: dict[tuple[str, str], tuple[str, int]] = {}
    names = Q()
    for row in failing:
        names |= Q(toolset=row["toolset"], tool=row["tool"])
    if failing:
        grouped = (
            recent.filter(names, status=ToolExecution.Status.ERROR)
            .values_list("toolset", "tool", "error_type")
            .annotate(n=Count("id"))
            .order_by()
        )
        for toolset, tool, kind, n in grouped:
            if n > kinds.get((toolset, tool), ("", 0))[1]:
                kinds[(toolset, tool)] = (kind or "error", n)
    for row in failing:
        row["rate"] = round(100 * row["errors"] / row["calls"])
        row["kind"] = kinds.get((row["toolset"], row["tool"]), ("", 0))[0]
    return slowest, failing


def _breakers() -> tuple[bool, list[Any], int]:
    """(breakers exist, the ones not closed, how many are closed)."""
    try:
        from toolsets.policy import breaker
    except ImportError:
        return False, [], 0
    try:
        states = breaker.all_states()
    except Exception:  # Redis away: shown as unknown rather than failing the page
        return True, [], 0
    tripped = [state for state in states if state.state != "closed"]
    return True, tripped, len(states) - len(tripped)


def _workers() -> tuple[list[dict[str, Any]], str]:
    try:
        return health.workers(), ""
    except Exception as exc:  # Redis away: the rest of the page still shows
        return [], type(exc).__name__


def overview(request: HttpRequest) -> HttpResponse:
    since = timezone.now() - WINDOW
    slowest, failing = _tools(since)
    workers, workers_error = _workers()
    has_breakers, tripped, closed = _breakers()
    outcomes = _outcomes(since)
    context = {
        **admin.site.each_context(request),
        "title": "Operations overview",
        # The models sidebar is for editing; this page is for reading.
        "is_nav_sidebar_enabled": False,
        "since": since,
        "outcomes": outcomes,
        "turns_total": sum(row["count"] for row in outcomes),
        "tokens": _tokens(since),
        "slowest": slowest,
        "failing": failing,
        "workers": workers,
        "workers_alive": sum(1 for worker in workers if worker["fresh"]),
        "workers_error": workers_error,
        "has_breakers": has_breakers,
        "tripped": tripped,
        "closed_breakers": closed,
    }
    return TemplateResponse(request, "admin/operations_overview.html", context)
