"""Workspace records as the tools return them, and the lookups every tool shares. Every lookup is
filtered by the calling user: an id that belongs to someone else is reported exactly like one
that does not exist."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from django.utils import timezone

from toolsets.base import ToolContext, ToolFailure

from .models import CalendarEvent, Email, Meeting, Project, SocialPost, Task

# What each platform accepts in one post.
POST_LIMITS = {"linkedin": 3000, "x": 280, "mastodon": 500, "bluesky": 300}

# -- lookups and records -------------------------------------------------------------------------------------


def user_id(ctx: ToolContext) -> int:
    if ctx.user_id is None:
        raise ToolFailure("The workspace belongs to a signed-in user.", error_type="permission_denied")
    return ctx.user_id


def iso(value: datetime | date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return timezone.localtime(value).isoformat(timespec="seconds")
    return value.isoformat()


_RELATIVE_DAYS = {"today": 0, "yesterday": -1, "tomorrow": 1}


def parse_date(value: str, field: str) -> date:
    text = value.strip().lower()
    if text in _RELATIVE_DAYS:
        return timezone.localdate() + timedelta(days=_RELATIVE_DAYS[text])
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{field}: {value!r} is not a date; use YYYY-MM-DD, e.g. 2025-06-30.") from None


def day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, datetime.min.time()))


def clean_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise ValueError("name: a task needs a name.")
    if len(name) > 200:
        raise ValueError("name: at most 200 characters.")
    return name


def find_project(user_id: int, name: str) -> Project:
    projects = Project.objects.filter(user_id=user_id)
    found = projects.filter(name__iexact=name.strip()).first()
    if found is None:
        # "website" is clear enough when only one project matches it.
        partial = list(projects.filter(name__icontains=name.strip())[:2])
        found = partial[0] if len(partial) == 1 else None
    if found is None:
        names = ", ".join(projects.values_list("name", flat=True)) or "none yet"
        raise ValueError(f"Unknown project {name!r}. Your projects: {names}.")
    return found


def get_task(user_id: int, task_id: int) -> Task:
    task = Task.objects.select_related("project").filter(user_id=user_id, pk=task_id).first()
    if task is None:
        raise ValueError(f"Task {task_id} not found. Use list_tasks to find task ids.")
    return task


def task_dict(task: Task) -> dict[str, Any]:
    return {
        "id": task.pk,
        "name": task.name,
        "status": task.status,
        "priority": task.priority,
        "dueDate": iso(task.due_date),
        "assignee": task.assignee,
        "project": task.project.name,
        "updatedAt": iso(task.updated_at),
    }


def event_dict(event: CalendarEvent) -> dict[str, Any]:
    return {
        "id": event.pk,
        "title": event.title,
        "start": iso(event.start),
        "end": iso(event.end),
        "attendees": event.attendees,
        "location": event.location,
    }


def email_dict(email: Email, *, body: bool = False) -> dict[str, Any]:
    data = {
        "id": email.pk,
        "sender": {"name": email.sender_name, "email": email.sender_email},
        "subject": email.subject,
        "snippet": email.snippet,
        "receivedAt": iso(email.received_at),
        "unread": email.unread,
    }
    if body:
        data["body"] = email.body
    return data


def meeting_dict(meeting: Meeting) -> dict[str, Any]:
    return {
        "id": meeting.pk,
        "title": meeting.title,
        "start": iso(meeting.start),
        "date": iso(timezone.localdate(meeting.start)),
        "attendees": meeting.attendees,
        "summary": meeting.summary,
        "actionItems": meeting.action_items,
    }


def post_dict(post: SocialPost) -> dict[str, Any]:
    return {
        "id": post.pk,
        "platform": post.platform,
        "platformName": post.get_platform_display(),
        "text": post.text,
        "status": post.status,
        "createdAt": iso(post.created_at),
        "characters": len(post.text),
        "limit": POST_LIMITS[post.platform],
    }


# -- sources: what a result cites -----------------------------------------------------------------


def _items_sources(
    result: Any, many: str, kind: str, title: str, snippet: Callable[[dict[str, Any]], Any]
) -> list[dict[str, str]]:
    """The items of a list result (under `many`), or the one item a get result is."""
    from toolsets.sources import source

    items = (result.get(many) or []) if isinstance(result, dict) and many in result else [result]
    return [
        source(item.get(title), kind=kind, snippet=snippet(item), key=f"{kind.lower()}:{item.get('id')}")
        for item in items
        if isinstance(item, dict) and item.get("id") is not None
    ]


def task_sources(result: Any) -> list[dict[str, str]]:
    return _items_sources(result, "tasks", "Task", "name", lambda t: f"{t.get('project', '')} · {t.get('status', '')}")


def event_sources(result: Any) -> list[dict[str, str]]:
    return _items_sources(
        result, "events", "Event", "title", lambda e: f"{e.get('start', '')} {e.get('location') or ''}"
    )


def email_sources(result: Any) -> list[dict[str, str]]:
    return _items_sources(result, "emails", "Email", "subject", lambda m: m.get("snippet"))


def meeting_sources(result: Any) -> list[dict[str, str]]:
    return _items_sources(result, "meetings", "Meeting", "title", lambda m: m.get("summary"))
