"""The demo model's answers from Workspace results: tasks (with the most pressing one named),
events, emails, meetings and their action items, post drafts and projects, each with its card."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import date
from typing import Any

from .formatting import (
    _quote,
    _sender_name,
    calendar_events_component,
    component_block,
    email_summary_component,
    meeting_summary_component,
    social_post_component,
    task_card_component,
    task_table_component,
)

_PRIORITY_RANK = {"URGENT": 3, "HIGH": 2, "MEDIUM": 1, "LOW": 0}
_STATUS_LABELS = {"TODO": "to-do", "IN_PROGRESS": "in-progress", "BLOCKED": "blocked", "DONE": "done"}


def _today() -> date:
    # The demo runs inside Django, which points the process's local time at TIME_ZONE:
    # the same "today" the workspace tools use.
    return date.today()


def _markdown_text(text: Any) -> str:
    """User data inside bold text: escape what would end it or start a link."""
    return re.sub(r"([\\`*_\[\]])", r"\\\1", " ".join(str(text).split()))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _join_words(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" and {words[-1]}"


def _day(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def _day_label(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b}"


def _due_phrase(due: date, today: date) -> str:
    days = (due - today).days
    if days < 0:
        return f"{_plural(-days, 'day')} overdue"
    return {0: "due today", 1: "due tomorrow"}.get(days, f"due in {days} days")


def _dicts(value: Any) -> list[dict[str, Any]] | None:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else None


def _most_pressing(tasks: Sequence[dict[str, Any]], today: date) -> dict[str, Any] | None:
    """Overdue first, then the highest priority, then the nearest due date."""
    open_tasks = [task for task in tasks if task.get("status") != "DONE"]

    def key(task: dict[str, Any]) -> tuple[bool, int, date]:
        due = _day(task.get("dueDate"))
        return (not (due and due < today), -_PRIORITY_RANK.get(str(task.get("priority")), 0), due or date.max)

    return min(open_tasks, key=key) if open_tasks else None


def _pressing_note(task: dict[str, Any], today: date, *, stale: bool) -> str:
    details = [f"{str(task.get('priority') or 'no').lower()} priority"]
    due = _day(task.get("dueDate"))
    if due:
        details.append(_due_phrase(due, today))
    if task.get("status") == "BLOCKED":
        details.append("blocked")
    updated = _day(task.get("updatedAt"))
    if stale and updated:
        details.append(f"untouched for {_plural((today - updated).days, 'day')}")
    sentence = f"Most pressing: **{_markdown_text(task.get('name'))}**"
    if task.get("project"):
        sentence += f" in {task['project']}"
    sentence += f" – {_join_words(details)}"
    if task.get("assignee"):
        sentence += f", assigned to {task['assignee']}"
    return sentence + "."


def _tasks_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    tasks = _dicts(result.get("tasks"))
    if tasks is None:
        return None
    stale_days = arguments.get("stale_days")
    overdue = arguments.get("overdue")
    projects = result.get("projects") or sorted({str(t.get("project")) for t in tasks if t.get("project")})
    if len(projects) > 1:
        where = f" across {_plural(len(projects), 'project')}"
    elif projects or arguments.get("project"):
        where = f" in {projects[0] if projects else arguments['project']}"
    else:
        where = ""
    count = len(tasks)
    if not tasks:
        if stale_days is not None:
            return f"Every open task{where} was updated in the last {_plural(stale_days, 'day')} – nothing is stale."
        if overdue:
            return f"Nothing{where} is overdue."
        return f"No tasks{where} match that."
    shown = f" (the first {count} of {result['total']})" if result.get("total") else ""
    if stale_days is not None:
        verb = "hasn't" if count == 1 else "haven't"
        intro = f"{_plural(count, 'task')}{where}{shown} {verb} been updated in {stale_days} days or more."
    elif overdue:
        intro = f"{_plural(count, 'task')}{where}{shown} {'is' if count == 1 else 'are'} overdue."
    else:
        statuses = set(arguments.get("status") or ())
        if statuses == {"TODO", "IN_PROGRESS", "BLOCKED"}:
            kind = "open task"
        elif len(statuses) == 1:
            kind = f"{_STATUS_LABELS.get(statuses.pop(), 'matching')} task"
        else:
            kind = "task"
        whose = f" assigned to {arguments['assignee']}" if arguments.get("assignee") else ""
        intro = f"Here {'is' if count == 1 else 'are'} {_plural(count, kind)}{where}{whose}{shown}:"
    parts = [intro, component_block("task_table", task_table_component(tasks))]
    today = _today()
    pressing = _most_pressing(tasks, today)
    if pressing:
        parts.append(_pressing_note(pressing, today, stale=stale_days is not None))
    return "\n\n".join(parts)


def _task_block(result: dict[str, Any], arguments: dict[str, Any], intro: str) -> str | None:
    if "name" not in result or "status" not in result:
        return None
    parts = [intro, component_block("task_card", task_card_component(result))]
    due = _day(result.get("dueDate"))
    if due and result.get("status") != "DONE" and (due - _today()).days <= 7:
        parts.append(f"It's {_due_phrase(due, _today())}.")
    return "\n\n".join(parts)


def _get_task_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    return _task_block(result, arguments, f"Here's task #{result.get('id', arguments.get('task_id'))}:")


def _create_task_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    name, project = _markdown_text(result.get("name")), result.get("project")
    return _task_block(result, arguments, f"I created **{name}** in {project}:")


def _update_task_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    return _task_block(
        result, arguments, f"I updated task #{result.get('id')}, **{_markdown_text(result.get('name'))}**:"
    )


def _events_range(result: dict[str, Any], arguments: dict[str, Any]) -> str:
    first, last = _day(result.get("startDate")), _day(result.get("endDate"))
    if not first or not last:
        return "in that period"
    if first == last:
        word = str(arguments.get("start_date") or "").lower()
        return f"{word} ({_day_label(first)})" if word in {"today", "tomorrow"} else f"on {_day_label(first)}"
    span = f"{_day_label(first)} – {_day_label(last)}"
    return f"this week ({span})" if not arguments else f"from {span}"


def _events_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    events = _dicts(result.get("events"))
    if events is None:
        return None
    when = _events_range(result, arguments)
    if not events:
        return f"Your calendar is clear {when}."
    parts = [f"You have {_plural(len(events), 'event')} {when}:"]
    parts.append(component_block("calendar_events", calendar_events_component(events)))
    days = [_day(event.get("start")) for event in events]
    per_day = Counter(day for day in days if day)
    if len(per_day) > 1:
        busiest, most = per_day.most_common(1)[0]
        if most > 1:
            parts.append(f"{busiest:%A} is the busiest day, with {_plural(most, 'event')}.")
    elif events[0].get("start"):
        start = re.search(r"T(\d{2}:\d{2})", str(events[0]["start"]))
        at = f" at {start.group(1)}" if start else ""
        parts.append(f"First up: **{_markdown_text(events[0].get('title'))}**{at}.")
    return "\n\n".join(parts)


def _emails_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    emails = _dicts(result.get("emails"))
    if emails is None:
        return None
    unread_only = result.get("unreadOnly", arguments.get("unread_only"))
    if not emails:
        return "No unread emails – you're all caught up." if unread_only else "Your inbox is empty."
    count = len(emails)
    if unread_only:
        intro = f"You have {_plural(count, 'unread email')}:"
    else:
        unread = result.get("unreadCount")
        of_them = f", {unread} unread in total" if isinstance(unread, int) else ""
        intro = f"Your {_plural(count, 'latest email') if count > 1 else 'latest email'}{of_them}:"
    newest = emails[0]
    sender = _markdown_text(_sender_name(newest.get("sender")))
    note = f"The newest is from **{sender}**: “{_quote(str(newest.get('subject') or ''))}”."
    return "\n\n".join([intro, component_block("email_summary", email_summary_component(emails)), note])


def _meeting_block(meeting: dict[str, Any], intro: str) -> str:
    items = [item for item in meeting.get("actionItems") or () if isinstance(item, dict)]
    still_open = [item for item in items if not item.get("done")]
    if still_open:
        first = still_open[0]
        owner = f" ({first['owner']})" if first.get("owner") else ""
        verb = "is" if len(still_open) == 1 else "are"
        text = _quote(str(first.get("text") or ""))
        counted = f"{len(still_open)} of {_plural(len(items), 'action item')}"
        note = f"{counted} {verb} still open, starting with “{text}”{owner}."
    elif items:
        note = "All its action items are done."
    else:
        note = "No action items were recorded."
    return "\n\n".join([intro, component_block("meeting_summary", meeting_summary_component(meeting)), note])


def _meetings_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    meetings = _dicts(result.get("meetings"))
    if meetings is None:
        return None
    asked = str(arguments.get("date") or "").lower()
    day = _day(result.get("date"))
    on = " yesterday" if asked == "yesterday" else f" on {_day_label(day)}" if day else ""
    if not meetings:
        return f"I found no meetings{on}."
    meeting = meetings[0]
    title = _markdown_text(meeting.get("title"))
    held = _day(meeting.get("date") or meeting.get("start"))
    held_on = f" ({_day_label(held)})" if held else ""
    if asked == "yesterday":
        intro = f"Yesterday's meeting was **{title}**{held_on}:"
    elif day:
        intro = f"Your meeting{on} was **{title}**:"
    else:
        intro = f"Your latest meeting was **{title}**{held_on}:"
    block = _meeting_block(meeting, intro)
    others = [str(m.get("title")) for m in meetings[1:]]
    if others and day:
        block += f" You had {_plural(len(others), 'other meeting')} that day: {_join_words(others)}."
    return block


def _get_meeting_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "title" not in result or "actionItems" not in result:
        return None
    held = _day(result.get("date") or result.get("start"))
    held_on = f" ({_day_label(held)})" if held else ""
    return _meeting_block(result, f"Here's **{_markdown_text(result.get('title'))}**{held_on}:")


def _post_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "text" not in result or "platform" not in result:
        return None
    platform = result.get("platformName") or result["platform"]
    parts = [
        f"I drafted this {platform} post and saved it to your drafts:",
        component_block("social_post", social_post_component(result)),
    ]
    length = result.get("characters")
    limit = result.get("limit")
    size = (
        f"It's {length:,} of {limit:,} characters and" if isinstance(length, int) and isinstance(limit, int) else "It"
    )
    parts.append(f"{size} hasn't been published – edit or post it whenever you're ready.")
    return "\n\n".join(parts)


def _projects_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    projects = _dicts(result.get("projects"))
    if projects is None:
        return None
    if not projects:
        return "You have no projects yet."
    lines = [f"You have {_plural(len(projects), 'project')}:", ""]
    for project in projects:
        counts = ""
        if isinstance(project.get("openTaskCount"), int) and isinstance(project.get("taskCount"), int):
            counts = f" – {project['openTaskCount']} open of {_plural(project['taskCount'], 'task')}"
        lines.append(f"- **{_markdown_text(project.get('name'))}**{counts}")
    example = f"Create a task “Check the analytics” in {projects[0].get('name')}, due tomorrow"
    lines += ["", f"To add a task, name it and its project, e.g. _{example}_."]
    return "\n".join(lines)


WORKSPACE_RENDERERS = {
    "list_tasks": _tasks_block,
    "get_task": _get_task_block,
    "create_task": _create_task_block,
    "update_task": _update_task_block,
    "list_events": _events_block,
    "list_emails": _emails_block,
    "list_meetings": _meetings_block,
    "get_meeting": _get_meeting_block,
    "draft_social_post": _post_block,
    "list_projects": _projects_block,
}
