"""Markdown the demo model writes: final answers from tool results and canned replies."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from . import files as demo_files
from .intents import CLOCK_MATH, EXA, WEB, WORKSPACE, Intent

TOOLSET_LABELS: dict[str, str] = {
    CLOCK_MATH: "Clock & Math",
    EXA: "Exa search",
    WEB: "Web",
    WORKSPACE: "Workspace",
}

TOOL_PURPOSES: dict[str, str] = {
    "current_time": "telling the time",
    "calculate": "arithmetic",
    "search": "web search and news",
    "fetch_page": "reading web pages",
    "list_projects": "projects",
    "list_tasks": "tasks",
    "get_task": "tasks",
    "create_task": "creating tasks",
    "update_task": "updating tasks",
    "list_events": "your calendar",
    "list_emails": "email",
    "list_meetings": "meeting summaries",
    "get_meeting": "meeting summaries",
    "draft_social_post": "drafting posts",
}

# The Workspace toolset is only offered once it has data to work on.
WORKSPACE_SETUP_NOTE = (
    "The **Workspace** toolset also needs its sample data: open **Toolsets** settings and click "
    "**Create sample data** on the Workspace card."
)

# "Error: …" from a tool itself, "Error (validation_error): …" from Tessera's executor.
_ERROR_RE = re.compile(r"Error(?:\s*\([^)\n]*\))?:")

_UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z"}


@dataclass(frozen=True)
class ToolResult:
    """A tool message paired with the call that produced it."""

    name: str
    arguments: dict[str, Any]
    content: str


# --- small formatting helpers ----------------------------------------------


def tool_suffix(name: str) -> str:
    return name.rsplit("__", 1)[-1]


def _quote(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat


def _blockquote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _inline_code(text: str) -> str:
    # A backtick inside would end the code span early and spill raw text into the answer.
    return f"`{text.replace('`', "'")}`"


def _link_text(text: str) -> str:
    return re.sub(r"([\[\]])", r"\\\1", " ".join(text.split()))


def _is_web_url(value: object) -> bool:
    # Only http(s) links become clickable: a "javascript:" URL from a tool must stay inert text.
    return isinstance(value, str) and re.match(r"https?://", value, re.IGNORECASE) is not None


def _join_phrases(phrases: Sequence[str]) -> str:
    if len(phrases) == 1:
        sentence = phrases[0]
    elif len(phrases) == 2:
        sentence = f"{phrases[0]}, and {phrases[1]}"
    else:
        sentence = ", ".join(phrases[:-1]) + f", and {phrases[-1]}"
    if sentence[:1].isalpha():
        sentence = sentence[0].upper() + sentence[1:]
    return sentence + "."


def _format_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def pretty_expression(expression: str) -> str:
    """'12*7' -> '12 × 7': spaced operators read better in a chat answer."""
    symbols = {"*": "×", "/": "÷", "+": "+", "-": "-", "^": "^", "%": "mod", "**": "^"}
    # An operator counts as binary only after an operand; "-3" keeps its sign glued on.
    return re.sub(
        r"(?<=[\d.)])\s*(\*\*|[-+*/^%])\s*",
        lambda m: f" {symbols[m.group(1)]} ",
        expression,
    )


def place_name(timezone: str) -> str:
    """'America/New_York' -> 'New York'."""
    return timezone.rsplit("/", 1)[-1].replace("_", " ")


def summarize_json(value: Any, limit: int = 200) -> str:
    """A one-line view of an unknown result, short enough to sit inside a sentence."""
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if isinstance(item, dict | list):
                shown = f"[{len(item)} items]" if isinstance(item, list) else "{…}"
            else:
                shown = json.dumps(item, ensure_ascii=False)
            parts.append(f"{key}: {shown}")
        text = ", ".join(parts)
    elif isinstance(value, list):
        text = f"a list of {len(value)} items"
    else:
        text = json.dumps(value, ensure_ascii=False)
    return _quote(text, limit)


def first_sentences(text: str, count: int = 2, limit: int = 400) -> str:
    flat = " ".join(text.split())
    sentences = re.split(r"(?<=[.!?])\s+", flat)
    return _quote(" ".join(sentences[:count]), limit)


# --- per-tool rendering ------------------------------------------------------


def _time_phrase(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    display = result.get("display")
    if not display and isinstance(result.get("iso"), str):
        match = re.search(r"T(\d{2}:\d{2})", result["iso"])
        display = match.group(1) if match else None
    if not display:
        return None
    zone = str(result.get("timezone") or arguments.get("timezone") or "UTC")
    date = result.get("date")
    if zone in _UTC_NAMES:
        return f"it's **{display}** UTC" + (f" ({date})" if date else "")
    abbreviation = result.get("abbreviation")
    if not abbreviation or not re.search(r"[A-Za-z]", str(abbreviation)):
        # Zones without a letter abbreviation report "+09"; the offset says the same thing clearer.
        offset = result.get("utc_offset")
        abbreviation = f"UTC{offset}" if offset else None
    details = ", ".join(str(part) for part in (abbreviation, date) if part)
    return f"it's **{display}** in {place_name(zone)}" + (f" ({details})" if details else "")


def _calculation_phrase(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "result" not in result:
        return None
    expression = str(result.get("expression") or arguments.get("expression") or "the expression")
    return f"**{pretty_expression(expression)} = {_format_number(result['result'])}**"


def _search_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    items = result.get("results")
    if not isinstance(items, list):
        return None
    query = result.get("query") or arguments.get("query") or "your search"
    if not items:
        return f'The search for "{query}" found nothing.'
    lines = [f'Here\'s what I found for "{query}":', ""]
    numbers = {s.get("url"): s.get("n") for s in _sources(result)}
    for item in items[:5]:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        title = _link_text(str(item.get("title") or url or "Untitled"))
        line = f"- [{title}]({url})" if _is_web_url(url) else f"- {title}"
        published = item.get("published_date") or item.get("publishedDate")
        if published:
            line += f" ({str(published)[:10]})"
        if numbers.get(url):
            line += f" [{numbers[url]}]"
        lines.append(line)
    return "\n".join(lines)


def _sources(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The numbered sources a tool result carries (see the executor): what the demo cites."""
    found = data.get("sources")
    return [s for s in found if isinstance(s, dict) and isinstance(s.get("n"), int)] if isinstance(found, list) else []


def cite_marks(data: dict[str, Any], limit: int = 5) -> str:
    return "".join(f" [{s['n']}]" for s in _sources(data)[:limit])


def with_citations(block: str, data: dict[str, Any]) -> str:
    """The block with its result's source numbers after its first sentence or paragraph."""
    marks = cite_marks(data)
    if not marks or "[" + str(_sources(data)[0]["n"]) + "]" in block:
        return block
    head, sep, rest = block.partition("\n\n")
    if head.startswith(":::component"):
        return marks.strip() + "\n\n" + block
    return head.rstrip() + marks + sep + rest


def _page_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "text" not in result and "title" not in result:
        return None
    url = result.get("url") or arguments.get("url")
    title = _link_text(str(result.get("title") or url or "The page"))
    heading = f"**[{title}]({url})**" if _is_web_url(url) else f"**{title}**"
    text = first_sentences(str(result.get("text") or ""))
    if not text:
        return f"{heading} has no readable text."
    return f"{heading}: {text}"


# --- generative UI components --------------------------------------------------
#
# A component is a fenced block the chat UI renders as a widget:
#
#     :::component{type="task_table"}
#     [{"name":"Fix login bug",...}]
#     :::
#
# The JSON sits on one line, so no line inside a block can close it early. Each
# component's fields are decided by exactly one function below, to keep them easy to
# line up with the renderer.

_TASK_FIELDS = ("id", "name", "status", "priority", "dueDate", "assignee", "project", "updatedAt")


def component_block(kind: str, data: Any) -> str:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f':::component{{type="{kind}"}}\n{payload}\n:::'


def task_table_component(tasks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: task.get(key) for key in _TASK_FIELDS} for task in tasks]


def task_card_component(task: dict[str, Any]) -> dict[str, Any]:
    card = {key: task.get(key) for key in _TASK_FIELDS}
    if task.get("description"):
        card["description"] = task["description"]
    return card


def calendar_events_component(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "title": event.get("title"),
            "start": event.get("start"),
            "end": event.get("end"),
            "attendees": list(event.get("attendees") or []),
            "location": event.get("location") or "",
        }
        for event in events
    ]


def email_summary_component(emails: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "from": _sender_name(email.get("sender")),
            "subject": email.get("subject"),
            "snippet": email.get("snippet"),
            "date": email.get("receivedAt"),
            "unread": bool(email.get("unread")),
        }
        for email in emails
    ]


def meeting_summary_component(meeting: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": meeting.get("title"),
        "date": meeting.get("date") or str(meeting.get("start") or "")[:10] or None,
        "attendees": list(meeting.get("attendees") or []),
        "summary": meeting.get("summary") or "",
        "actionItems": [
            {"text": item.get("text"), "owner": item.get("owner"), "done": bool(item.get("done"))}
            for item in meeting.get("actionItems") or ()
            if isinstance(item, dict)
        ],
    }


def social_post_component(post: dict[str, Any]) -> dict[str, Any]:
    # The workspace does not know the user's display name, and the card wants one.
    return {"platform": post.get("platform"), "author": "You", "text": post.get("text")}


# --- workspace answers -----------------------------------------------------------

_PRIORITY_RANK = {"URGENT": 3, "HIGH": 2, "MEDIUM": 1, "LOW": 0}
_STATUS_LABELS = {"TODO": "to-do", "IN_PROGRESS": "in-progress", "BLOCKED": "blocked", "DONE": "done"}


def _today() -> date:
    # The demo runs inside Django, which points the process's local time at TIME_ZONE:
    # the same "today" the workspace tools use.
    return date.today()


def _sender_name(sender: Any) -> str:
    if isinstance(sender, dict):
        return str(sender.get("name") or sender.get("email") or "")
    return str(sender or "")


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


_INLINE_RENDERERS = {"current_time": _time_phrase, "calculate": _calculation_phrase}
_BLOCK_RENDERERS = {"search": _search_block, "fetch_page": _page_block, **WORKSPACE_RENDERERS, **demo_files.RENDERERS}


def _failure_block(tool: str, error: str) -> str:
    return f"The {_inline_code(tool)} tool failed:\n\n{_blockquote(_quote(error, 300))}"


def results_answer(results: Iterable[ToolResult], missing: Sequence[Intent] = ()) -> str:
    """The final answer after tool calls: one sentence of short facts, then longer blocks."""
    phrases: list[str] = []
    blocks: list[str] = []
    for item in results:
        tool = tool_suffix(item.name)
        content = item.content.strip()
        if _ERROR_RE.match(content):
            blocks.append(_failure_block(tool, content))
            continue
        try:
            data = json.loads(content)
        except ValueError:
            blocks.append(f"The {_inline_code(tool)} tool returned: “{_quote(content)}”")
            continue
        if isinstance(data, dict) and data.get("error") and len(data) <= 2:
            blocks.append(_failure_block(tool, f"Error: {data['error']}"))
            continue
        rendered: str | None = None
        if isinstance(data, dict):
            if tool in _INLINE_RENDERERS:
                rendered = _INLINE_RENDERERS[tool](data, item.arguments)
                if rendered:
                    phrases.append(rendered)
                    continue
            elif tool in _BLOCK_RENDERERS:
                rendered = _BLOCK_RENDERERS[tool](data, item.arguments)
                if rendered:
                    rendered = with_citations(rendered, data)
        blocks.append(rendered or f"The {_inline_code(tool)} tool returned {_inline_code(summarize_json(data))}.")
    parts = ([_join_phrases(phrases)] if phrases else []) + blocks
    if missing:
        parts.append(missing_toolsets_note(missing))
    if not parts:
        return "The tools finished without returning anything I could use."
    return "\n\n".join(parts)


# --- canned replies ------------------------------------------------------------


def _needed_toolsets(intents: Sequence[Intent]) -> dict[str, list[str]]:
    """Toolset id -> what it would have been used for, in the order asked."""
    needed: dict[str, list[str]] = {}
    for intent in intents:
        purposes = needed.setdefault(intent.toolset, [])
        purpose = TOOL_PURPOSES.get(intent.tool, intent.tool)
        if purpose not in purposes:
            purposes.append(purpose)
    return needed


def _toolset_label(toolset: str) -> str:
    return f"**{TOOLSET_LABELS.get(toolset, toolset)}** ({_inline_code(toolset)})"


def missing_toolsets_note(intents: Sequence[Intent]) -> str:
    needed = _needed_toolsets(intents)
    wanted = "; ".join(f"{_toolset_label(toolset)} for {', '.join(purposes)}" for toolset, purposes in needed.items())
    note = f"I skipped part of your question. To answer all of it, enable {wanted}."
    return f"{note} {WORKSPACE_SETUP_NOTE}" if WORKSPACE in needed else note


def enable_toolsets_answer(intents: Sequence[Intent]) -> str:
    needed = _needed_toolsets(intents)
    if len(needed) == 1:
        intro = "I'd answer that with a tool, but its toolset isn't enabled in this chat."
    else:
        intro = "I'd answer that with tools, but their toolsets aren't enabled in this chat."
    lines = [f"- {_toolset_label(toolset)}: {', '.join(purposes)}" for toolset, purposes in needed.items()]
    setup = ["", WORKSPACE_SETUP_NOTE] if WORKSPACE in needed else []
    return "\n".join(
        [
            f"{intro} Enable {'it' if len(needed) == 1 else 'them'} and ask again:",
            "",
            *lines,
            *setup,
            "",
            "_This is Tessera's offline demo model: it answers only through tools._",
        ]
    )


def help_answer(user_text: str) -> str:
    quote = _quote(user_text) or "(an empty message)"
    return "\n".join(
        [
            (
                "I'm **Tessera's offline demo model**. I run without a network or an "
                "API key, so I only understand a few kinds of requests:"
            ),
            "",
            '- **Time**: "What time is it in Tokyo?" (`clock_math` toolset)',
            '- **Arithmetic**: "What is 12*7?", "15 plus 27" (`clock_math` toolset)',
            '- **News and search**: "Latest news about AI", "Search for …" (`exa` toolset)',
            '- **Web pages**: "Summarize https://…" (`web` toolset)',
            (
                '- **Workspace**: "Summarize stale tasks across projects", "What\'s on my calendar this week?", '
                '"Any unread emails?", "Summarize yesterday\'s meeting", "Draft a LinkedIn post about our launch", '
                '"Show task 3", "Create a task \'Book a venue\' in Q3 marketing" (`workspace` toolset, '
                "after **Create sample data** in Toolsets settings)"
            ),
            "",
            "You wrote:",
            "",
            _blockquote(quote),
            "",
            "Pick a real model for this chat to get open-ended answers.",
        ]
    )


def out_of_tools_answer() -> str:
    return (
        "I've reached the limit of tool calls for this turn before getting any results, "
        "so I can't answer that reliably. Try asking again, or ask for fewer things at once."
    )


FAIL_MID_TEXT = "Let me work through this step by step. First, I'll look at what you asked and then"

SLOW_TEXT = """\
## A longer answer, streamed slowly

This reply exists so you can watch a long answer arrive piece by piece. It is written by \
Tessera's offline demo model, which never touches the network: every word below was decided \
in advance, and the only thing that varies is how fast it reaches your screen.

While it streams, try the things a real conversation has to survive:

- Press **Stop** part-way through and check that the partial text is kept.
- Reload the page and check that the turn picks up where it was, or shows as stopped.
- Open the same chat in a second tab and compare what both tabs show.
- Send another message straight after stopping, to see that the chat is ready again.

The stream is paced at a fixed rate of tokens per second, so a long answer like this one takes \
several seconds. That is slow enough to press a button in the middle and fast enough not to be \
tedious. The rate can be changed for a single call, or for the whole process through an \
environment variable, and a rate of zero turns the delay off for tests.

Here is a small code block, because answers often contain one and the renderer should cope \
with a fence that is still open while text arrives:

```python
def tokens(text: str) -> list[str]:
    # Split on whitespace but keep it attached, like a model's tokens.
    return re.findall(r"\\S+\\s*", text)
```

Markdown has to render correctly both while it streams and once it is complete. Half a table, \
half a list item or an unfinished code fence are normal states during streaming, and none of \
them should break the page or hide text that already arrived.

That is the end of this long answer. If you stopped it early, the last sentence you can read \
is wherever the stream was when you pressed the button.
"""


def week_plan_intro() -> str:
    """The Workspace assistant's plan: what it looked at, then the week laid out."""
    return (
        "Here is a plan for your week: start each day with the most pressing open task, keep the "
        "meetings below in view, and leave the afternoons for focused work."
    )
