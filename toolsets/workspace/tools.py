"""Workspace tools: the calling user's projects, tasks, calendar, email, meetings and post drafts.

Every query is filtered by `ctx.user_id`; an id that belongs to someone else is reported exactly
like one that does not exist.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated, Any, Literal

from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from toolsets.base import ToolContext, Toolset, plural, tool

from . import records
from .models import CalendarEvent, Email, Meeting, Project, SocialPost, Task
from .sample_data import has_data

TaskStatus = Literal["TODO", "IN_PROGRESS", "BLOCKED", "DONE"]
TaskPriority = Literal["LOW", "MEDIUM", "HIGH", "URGENT"]
Platform = Literal["linkedin", "x", "mastodon", "bluesky"]

MAX_TASKS = 200
MAX_EMAILS = 100
MAX_RANGE_DAYS = 92
POST_LIMITS = records.POST_LIMITS
POST_NAMES = dict(SocialPost.Platform.choices)


# -- projects and tasks --------------------------------------------------------------------------


@tool(
    display_name="List projects",
    timeout_s=10,
    summarize=lambda r: plural(r["count"], "project") if r["count"] else "No projects",
    status_text=lambda args: "Listing projects…",
)
def list_projects(ctx: ToolContext) -> dict[str, Any]:
    """List your projects with their open and total task counts."""
    projects = [
        {
            "id": project.pk,
            "name": project.name,
            "description": project.description,
            "taskCount": project.task_count,
            "openTaskCount": project.open_task_count,
        }
        for project in Project.objects.filter(user_id=records.user_id(ctx))
        .annotate(
            task_count=Count("tasks"),
            open_task_count=Count("tasks", filter=~Q(tasks__status=Task.Status.DONE)),
        )
        .order_by("name")
    ]
    return {"projects": projects, "count": len(projects)}


def _tasks_summary(result: dict[str, Any]) -> str:
    if not result["count"]:
        return "No tasks match"
    return f"{plural(result['count'], 'task')} from {plural(len(result['projects']), 'project')}"


@tool(
    display_name="List tasks",
    timeout_s=10,
    summarize=_tasks_summary,
    sources=records.task_sources,
    status_text=lambda args: "Looking for stale tasks…" if args.get("stale_days") else "Listing tasks…",
)
def list_tasks(
    ctx: ToolContext,
    project: Annotated[str | None, "Project name; omit for all projects"] = None,
    status: Annotated[list[TaskStatus] | None, "Only tasks with one of these statuses"] = None,
    assignee: Annotated[str | None, "Only tasks assigned to this person (part of the name is enough)"] = None,
    stale_days: Annotated[int | None, "Only tasks not DONE and not updated for this many days"] = None,
    overdue: Annotated[bool, "Only tasks not DONE whose due date has passed"] = False,
    limit: Annotated[int, "At most this many tasks"] = 50,
) -> dict[str, Any]:
    """List your tasks, filtered by project, status, assignee, staleness or overdue."""
    user_id = records.user_id(ctx)
    tasks: QuerySet[Task] = Task.objects.filter(user_id=user_id).select_related("project")
    if project:
        tasks = tasks.filter(project=records.find_project(user_id, project))
    if status:
        tasks = tasks.filter(status__in=status)
    if assignee and assignee.strip():
        tasks = tasks.filter(assignee__icontains=assignee.strip())
    if stale_days is not None:
        if stale_days < 0:
            raise ValueError("stale_days: must be 0 or more.")
        cutoff = timezone.now() - timedelta(days=stale_days)
        tasks = tasks.exclude(status=Task.Status.DONE).filter(updated_at__lt=cutoff)
    if overdue:
        tasks = tasks.exclude(status=Task.Status.DONE).filter(due_date__lt=timezone.localdate())
    if stale_days is not None:
        tasks = tasks.order_by("updated_at", "id")  # the stalest first
    else:
        tasks = tasks.order_by(F("due_date").asc(nulls_last=True), "id")
    limit = max(1, min(limit, MAX_TASKS))
    total = tasks.count()
    found = [records.task_dict(task) for task in tasks[:limit]]
    result: dict[str, Any] = {
        "tasks": found,
        "count": len(found),
        "projects": sorted({task["project"] for task in found}),
    }
    if total > len(found):
        result["total"] = total
    return result


@tool(
    display_name="Get task",
    timeout_s=10,
    summarize=lambda r: f"{r['name']} ({r['status']})",
    sources=records.task_sources,
    status_text=lambda args: f"Looking up task #{args.get('task_id', '')}…",
)
def get_task(ctx: ToolContext, task_id: Annotated[int, "The task's id"]) -> dict[str, Any]:
    """Get one task by id."""
    return records.task_dict(records.get_task(records.user_id(ctx), task_id))


@tool(
    display_name="Create task",
    timeout_s=10,
    side_effects=True,
    policy="ask",
    summarize=lambda r: f"Created “{r['name']}” in {r['project']}",
    status_text=lambda args: f"Creating task “{args.get('name', '')}”…",
)
def create_task(
    ctx: ToolContext,
    project: Annotated[str, "Name of the project the task belongs to"],
    name: Annotated[str, "What needs doing"],
    priority: TaskPriority = "MEDIUM",
    due_date: Annotated[str | None, "Due date, YYYY-MM-DD"] = None,
    assignee: Annotated[str | None, "Who does it"] = None,
) -> dict[str, Any]:
    """Create a task in one of your projects."""
    user_id = records.user_id(ctx)
    found = records.find_project(user_id, project)
    task = Task.objects.create(
        user_id=user_id,
        project=found,
        name=records.clean_name(name),
        priority=priority,
        due_date=records.parse_date(due_date, "due_date") if due_date else None,
        assignee=(assignee or "").strip()[:100],
    )
    return records.task_dict(task)


@tool(
    display_name="Update task",
    timeout_s=10,
    side_effects=True,
    policy="ask",
    summarize=lambda r: f"Updated “{r['name']}” ({r['status']}, {r['priority']})",
    status_text=lambda args: f"Updating task #{args.get('task_id', '')}…",
)
def update_task(
    ctx: ToolContext,
    task_id: Annotated[int, "The task's id"],
    status: TaskStatus | None = None,
    priority: TaskPriority | None = None,
    due_date: Annotated[str | None, "New due date, YYYY-MM-DD; an empty string clears it"] = None,
    assignee: Annotated[str | None, "New assignee; an empty string unassigns"] = None,
    name: Annotated[str | None, "New name"] = None,
) -> dict[str, Any]:
    """Change a task's status, priority, due date, assignee or name."""
    task = records.get_task(records.user_id(ctx), task_id)
    if all(value is None for value in (status, priority, due_date, assignee, name)):
        raise ValueError("Nothing to update: pass at least one of status, priority, due_date, assignee, name.")
    if status is not None:
        task.status = status
    if priority is not None:
        task.priority = priority
    if due_date is not None:
        task.due_date = records.parse_date(due_date, "due_date") if due_date.strip() else None
    if assignee is not None:
        task.assignee = assignee.strip()[:100]
    if name is not None:
        task.name = records.clean_name(name)
    task.updated_at = timezone.now()
    task.save()
    return records.task_dict(task)


# -- calendar, email, meetings, posts -----------------------------------------------------------


def _events_summary(result: dict[str, Any]) -> str:
    start, end = date.fromisoformat(result["startDate"]), date.fromisoformat(result["endDate"])
    span = f"{start:%a %-d %b} – {end:%a %-d %b}"
    return f"{plural(result['count'], 'event')}, {span}" if result["count"] else f"No events, {span}"


@tool(
    display_name="List events",
    timeout_s=10,
    summarize=_events_summary,
    sources=records.event_sources,
    status_text=lambda args: "Checking your calendar…",
)
def list_events(
    ctx: ToolContext,
    start_date: Annotated[str | None, "First day, YYYY-MM-DD; default: Monday of this week"] = None,
    end_date: Annotated[str | None, "Last day (inclusive), YYYY-MM-DD; default: six days after the first"] = None,
) -> dict[str, Any]:
    """List your calendar events between two dates (default: this week, Monday to Sunday)."""
    user_id = records.user_id(ctx)
    today = timezone.localdate()
    if start_date:
        first = records.parse_date(start_date, "start_date")
    elif end_date:
        first = records.parse_date(end_date, "end_date") - timedelta(days=6)
    else:
        first = today - timedelta(days=today.weekday())
    last = records.parse_date(end_date, "end_date") if end_date else first + timedelta(days=6)
    if last < first:
        raise ValueError("end_date is before start_date.")
    if (last - first).days >= MAX_RANGE_DAYS:
        raise ValueError(f"At most {MAX_RANGE_DAYS} days at a time.")
    # Events that overlap the range, including ones that started the evening before.
    events = CalendarEvent.objects.filter(
        user_id=user_id, start__lt=records.day_start(last + timedelta(days=1)), end__gt=records.day_start(first)
    ).order_by("start", "id")
    found = [records.event_dict(event) for event in events]
    return {"events": found, "count": len(found), "startDate": first.isoformat(), "endDate": last.isoformat()}


def _emails_summary(result: dict[str, Any]) -> str:
    if result["unreadOnly"]:
        return plural(result["count"], "unread email") if result["count"] else "No unread emails"
    if not result["count"]:
        return "No emails"
    return f"{plural(result['count'], 'email')}, {result['unreadCount']} unread"


@tool(
    display_name="List emails",
    timeout_s=10,
    summarize=_emails_summary,
    sources=records.email_sources,
    status_text=lambda args: "Checking your inbox…",
)
def list_emails(
    ctx: ToolContext,
    unread_only: Annotated[bool, "Only unread emails"] = False,
    limit: Annotated[int, "At most this many emails, newest first"] = 20,
) -> dict[str, Any]:
    """List the emails in your inbox, newest first."""
    user_id = records.user_id(ctx)
    inbox = Email.objects.filter(user_id=user_id)
    emails = inbox.filter(unread=True) if unread_only else inbox
    limit = max(1, min(limit, MAX_EMAILS))
    found = [records.email_dict(email) for email in emails.order_by("-received_at", "-id")[:limit]]
    return {
        "emails": found,
        "count": len(found),
        "unreadCount": inbox.filter(unread=True).count(),
        "unreadOnly": unread_only,
    }


@tool(
    display_name="Read email",
    timeout_s=10,
    summarize=lambda r: f"“{r['subject']}” from {r['sender']['name']}",
    sources=records.email_sources,
    status_text=lambda args: f"Opening email #{args.get('email_id', '')}…",
)
def get_email(ctx: ToolContext, email_id: Annotated[int, "The email's id"]) -> dict[str, Any]:
    """Get one email with its full body."""
    email = Email.objects.filter(user_id=records.user_id(ctx), pk=email_id).first()
    if email is None:
        raise ValueError(f"Email {email_id} not found. Use list_emails to find email ids.")
    return records.email_dict(email, body=True)


def _meetings_summary(result: dict[str, Any]) -> str:
    on = f" on {result['date']}" if result["date"] else ""
    return f"{plural(result['count'], 'meeting')}{on}" if result["count"] else f"No meetings{on}"


@tool(
    display_name="List meetings",
    timeout_s=10,
    summarize=_meetings_summary,
    sources=records.meeting_sources,
    status_text=lambda args: "Looking up meetings…",
)
def list_meetings(
    ctx: ToolContext,
    date: Annotated[str | None, "Only meetings on this day, YYYY-MM-DD; omit for the latest"] = None,
) -> dict[str, Any]:
    """List your meetings with their summaries and action items."""
    user_id = records.user_id(ctx)
    meetings = Meeting.objects.filter(user_id=user_id)
    day = records.parse_date(date, "date") if date else None
    if day is not None:
        meetings = meetings.filter(
            start__gte=records.day_start(day), start__lt=records.day_start(day + timedelta(days=1))
        )
    found = [records.meeting_dict(meeting) for meeting in meetings.order_by("-start", "-id")[:20]]
    return {"meetings": found, "count": len(found), "date": records.iso(day)}


def _meeting_summary(result: dict[str, Any]) -> str:
    items = result["actionItems"]
    open_items = sum(1 for item in items if not item.get("done"))
    return f"{result['title']}: {plural(len(items), 'action item')}, {open_items} open"


@tool(
    display_name="Get meeting",
    timeout_s=10,
    summarize=_meeting_summary,
    sources=records.meeting_sources,
    status_text=lambda args: f"Opening meeting #{args.get('meeting_id', '')}…",
)
def get_meeting(ctx: ToolContext, meeting_id: Annotated[int, "The meeting's id"]) -> dict[str, Any]:
    """Get one meeting's summary and action items."""
    meeting = Meeting.objects.filter(user_id=records.user_id(ctx), pk=meeting_id).first()
    if meeting is None:
        raise ValueError(f"Meeting {meeting_id} not found. Use list_meetings to find meeting ids.")
    return records.meeting_dict(meeting)


@tool(
    display_name="Draft social post",
    timeout_s=10,
    side_effects=True,
    policy="ask",
    summarize=lambda r: f"Saved a {r['platformName']} draft ({plural(r['characters'], 'character')})",
    status_text=lambda args: f"Saving a {POST_NAMES.get(args.get('platform', ''), 'social')} draft…",
)
def draft_social_post(
    ctx: ToolContext,
    platform: Platform,
    text: Annotated[str, "The post's text"],
) -> dict[str, Any]:
    """Save a social media post as a draft (it is not published)."""
    user_id = records.user_id(ctx)
    text = text.strip()
    if not text:
        raise ValueError("text: the post is empty.")
    limit = POST_LIMITS[platform]
    if len(text) > limit:
        raise ValueError(f"{POST_NAMES[platform]} posts are limited to {limit} characters; this one has {len(text)}.")
    post = SocialPost.objects.create(user_id=user_id, platform=platform, text=text)
    return records.post_dict(post)


def _needs_setup(user_id: int) -> bool:
    return not has_data(user_id)


def _setup(user_id: int) -> None:
    from django.contrib.auth import get_user_model

    from .sample_data import seed_for_user

    seed_for_user(get_user_model().objects.get(pk=user_id))


toolset = Toolset(
    id="workspace",
    name="Workspace",
    description="Your projects, tasks, calendar, email, meetings and post drafts (sample data).",
    tools=[
        list_projects,
        list_tasks,
        get_task,
        create_task,
        update_task,
        list_events,
        list_emails,
        get_email,
        list_meetings,
        get_meeting,
        draft_social_post,
    ],
    needs_setup=_needs_setup,
    setup_label="Create sample data",
    setup=_setup,
)
