"""What the demo model reads as a Workspace request: tasks (list, show, create, update), the
calendar, email, meetings and their action items, projects, and social post drafts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

from .reading import _SEARCH_RE, URL_RE, WORKSPACE, Intent, _clean_query, blank_urls, split_clauses

# The demo cannot ask a follow-up question, so each clause is read as one request. A
# request that writes something (a task, a post) takes its whole clause: the words in
# "draft a post about our overdue tasks" are the post's topic, not a second question.

_TASK_ID_RE = re.compile(r"\btask\s*(?:#|no\.?|number|id)?\s*#?(?P<id>\d{1,9})\b", re.IGNORECASE)
_MEETING_ID_RE = re.compile(r"\bmeeting\s*(?:#|no\.?|number|id)?\s*#?(?P<id>\d{1,9})\b", re.IGNORECASE)
_TASKS_RE = re.compile(
    r"\b(?:tasks|to-?dos|to-?do\s+list|backlog|tickets|work\s+items)\b|\bmy\s+plate\b", re.IGNORECASE
)
_STALE_RE = re.compile(
    r"\b(?:stale|stalled|neglected|forgotten|untouched|gone\s+quiet"
    r"|(?:not|haven'?t|hasn'?t|n't)\s+(?:been\s+)?(?:updated|touched|moved|changed)"
    r"|no\s+(?:updates?|progress|activity))\b",
    re.IGNORECASE,
)
_OVERDUE_RE = re.compile(
    r"\b(?:overdue|past\s+(?:their\s+|the\s+)?due(?:\s+date)?|late|behind\s+schedule|missed\s+(?:the\s+|their\s+)?deadlines?)\b",
    re.IGNORECASE,
)
_DAYS_RE = re.compile(r"\b(?P<n>\d{1,3}|a|one|two|three|four)\s+(?P<unit>days?|weeks?)\b", re.IGNORECASE)
_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4}
_MINE_RE = re.compile(
    r"\bmy\s+(?:\w+\s+)?(?:tasks|to-?dos|to-?do\s+list|plate|backlog)\b|\bassigned\s+to\s+(?:me|myself)\b",
    re.IGNORECASE,
)


def asks_for_own_tasks(message: str) -> bool:
    """Whether the message asks for the user's own tasks: "my tasks", "on my plate", "assigned to me"."""
    return bool(_MINE_RE.search(message))


_ASSIGNEE_RE = re.compile(
    r"\b(?:assigned\s+to|owned\s+by)\s+(?P<first>[\w'’.-]+)(?:\s+(?P<second>[\w'’-]+))?", re.IGNORECASE
)
_POSSESSIVE_ASSIGNEE_RE = re.compile(r"\b(?P<who>[A-Z][a-z]+)['’]s\s+(?:\w+\s+)?(?:tasks|to-?dos)\b")
_NOT_NAMES = {"me", "myself", "us", "what", "today", "tomorrow", "yesterday", "who", "that", "it", "here", "there"}
_OPEN_STATUSES = ["TODO", "IN_PROGRESS", "BLOCKED"]
_STATUS_WORDS: list[tuple[re.Pattern[str], list[str]]] = [
    (re.compile(r"\bblocked\b", re.IGNORECASE), ["BLOCKED"]),
    (re.compile(r"\bin[\s-]progress\b|\bongoing\b|\bunder\s+way\b", re.IGNORECASE), ["IN_PROGRESS"]),
    (re.compile(r"\b(?:not\s+(?:yet\s+)?started|unstarted)\b", re.IGNORECASE), ["TODO"]),
    (re.compile(r"\b(?:done|completed|finished|closed)\b", re.IGNORECASE), ["DONE"]),
    (
        re.compile(r"\b(?:open|active|remaining|outstanding|pending|unfinished|incomplete)\b", re.IGNORECASE),
        _OPEN_STATUSES,
    ),
]
_STATUS_ORDER = ["TODO", "IN_PROGRESS", "BLOCKED", "DONE"]
_PROJECT_MARKER_RE = re.compile(r"\b(?:in|for|on|from|under|within)\s+(?:the\s+)?(?:project\s+)?", re.IGNORECASE)
_PROJECT_END_RE = re.compile(
    r"\s+(?:that|which|who|assigned|owned|due|with|and|across|not|sorted|ordered|by|please)\b|[,;:?!]",
    re.IGNORECASE,
)
_NOT_PROJECTS = {
    "me", "my", "our", "this", "next", "last", "today", "tomorrow", "progress", "time", "ages", "a", "all", "any",
    "every", "each", "days", "weeks", "while", "total", "detail", "details", "order", "short", "general", "plate",
}  # fmt: skip

_MEETING_RE = re.compile(r"\b(?:meetings?|stand-?ups?|syncs?|1:1s?|one-on-ones?)\b", re.IGNORECASE)
_MEETING_SUMMARY_RE = re.compile(
    r"\b(?:summar\w*|recap|notes|minutes|action\s+items?|takeaways?|decisions?|decided|discuss\w*|happened"
    r"|went|outcomes?|follow-?ups?)\b",
    re.IGNORECASE,
)
_ACTION_ITEMS_RE = re.compile(r"\baction\s+items?\b|\bfollow-?ups?\b", re.IGNORECASE)
_ASKING_RE = re.compile(
    r"\?|\b(?:what|which|when|any|do\s+i|have\s+i|show|list|tell|check|upcoming|next)\b", re.IGNORECASE
)
_PAST_RE = re.compile(r"\b(?:yesterday|last|latest|previous|most\s+recent|earlier)\b", re.IGNORECASE)
_CALENDAR_RE = re.compile(
    r"\b(?:calendar|agenda|schedule|diary)\b"
    r"|\b(?:my|upcoming|any|today'?s|tomorrow'?s|this\s+week'?s|next\s+week'?s)\s+(?:events?|appointments?)\b"
    r"|\b(?:events?|appointments?)\s+(?:today|tomorrow|this\s+week|next\s+week)\b"
    r"|\b(?:am\s+i|are\s+we)\s+(?:free|busy|booked)\b"
    r"|\bwhat(?:'s|’s|s|\s+is)\s+on\s+(?:for\s+)?(?:today|tomorrow|this\s+week|next\s+week)\b",
    re.IGNORECASE,
)
_EMAIL_RE = re.compile(r"\b(?:e-?mails?|inbox|mail)\b", re.IGNORECASE)
_UNREAD_RE = re.compile(r"\b(?:unread|new|unopened|unseen|(?:haven'?t|not)\s+(?:yet\s+)?(?:read|opened))\b", re.I)
_PROJECTS_RE = re.compile(r"\bprojects\b", re.IGNORECASE)
_ISO_DATE_RE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")

_CREATE_TASK_RE = re.compile(
    r"(?:\b(?:create|add|new)\b(?:\s+(?:me|us))?\s+(?:a\s+|an\s+|one\s+)?(?:new\s+)?"
    r"|\b(?:make|open|log)\b(?:\s+(?:me|us))?\s+(?:a\s+|an\s+|one\s+|a\s+new\s+))"
    # Not "make task 5 urgent", which is about an existing task.
    r"(?:task|to-?do)\b(?!\s*(?:#|no\.?|number|id)?\s*#?\d)\s*(?:called|named|titled|:)?\s*",
    re.IGNORECASE,
)
# A question about what happened, where a verb like "create" or "finish" is not a request.
_ASKS_ABOUT_THE_PAST_RE = re.compile(
    r"\s*(?:did|does|has|have|had|was|were|is|are|who|when|why|which|whether)\b", re.IGNORECASE
)
_UPDATE_VERB_RE = re.compile(
    r"\b(?:mark|set|move|change|update|close|complete|finish|reopen|start|flag|make)\b", re.IGNORECASE
)
_UPDATE_STATUS_WORDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:done|complete|completed|finished|closed?|finish)\b", re.IGNORECASE), "DONE"),
    (re.compile(r"\bin[\s-]progress\b|\bstart(?:ed)?\b", re.IGNORECASE), "IN_PROGRESS"),
    (re.compile(r"\bblocked\b", re.IGNORECASE), "BLOCKED"),
    (re.compile(r"\b(?:to\s*do|todo|reopen(?:ed)?|not\s+started)\b", re.IGNORECASE), "TODO"),
]
_PRIORITY_RE = re.compile(
    r"\b(?P<a>low|medium|normal|high|urgent)(?:\s+|-)priority\b"
    r"|\bpriority\s*(?:is\s+|of\s+|to\s+|:\s*|=\s*)?(?P<b>low|medium|normal|high|urgent)\b"
    r"|\b(?:as|it'?s|make\s+it)\s+(?P<c>urgent)\b",
    re.IGNORECASE,
)
_DUE_RE = re.compile(
    r",?\s*\b(?:due|by|deadline)\s*(?:on\s+|date\s+|:\s*)?(?P<due>\d{4}-\d{2}-\d{2}|today|tomorrow)\b", re.IGNORECASE
)
_ASSIGN_TO_RE = re.compile(
    r",?\s*\b(?:assigned\s+to|assign(?:\s+it)?\s+to|owned\s+by|owner\s*:?)\s+(?P<who>[\w'’.-]+(?:\s+[A-Z][\w'’-]*)?)",
    re.IGNORECASE,
)
_QUOTED_RE = re.compile(r"[\"“](?P<a>[^\"”]+)[\"”]|(?:^|(?<=\s))'(?P<b>[^']+)'(?=[\s,.;:!?]|$)")
_TASK_PROJECT_RE = re.compile(r"\s(?:in|into|to|under|for|on)\s+(?:the\s+)?(?:project\s+)?", re.IGNORECASE)

_POST_RE = re.compile(
    r"\b(?:draft|write|compose|prepare|create|make|craft)\b(?:\s+\w+){0,4}?\s+"
    r"(?:(?<!blog\s)(?:social(?:\s+media)?\s+)?post|tweet|toot|skeet|thread|announcement)\b",
    re.IGNORECASE,
)
_PLATFORMS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\blinked\s*in\b", re.IGNORECASE), "linkedin"),
    (re.compile(r"\bmastodon\b|\btoot\b", re.IGNORECASE), "mastodon"),
    (re.compile(r"\bblue\s*sky\b|\bbsky\b|\bskeet\b", re.IGNORECASE), "bluesky"),
    (re.compile(r"\btwitter\b|\btweet\b|\b(?:on|for|to)\s+x\b|\bx\s+(?:post|thread)\b", re.IGNORECASE), "x"),
]
_PLATFORM_MENTION_RE = re.compile(
    r"\s*\b(?:on|for|to)\s+(?:linked\s*in|mastodon|blue\s*sky|bsky|twitter|x)\b", re.IGNORECASE
)
_TOPIC_RE = re.compile(r"\b(?:about|regarding|announcing|celebrating|on|for)\s+(?P<topic>.+)", re.IGNORECASE)
# The shortest platform limit (X: 280) bounds what a post can spend on its topic.
_TOPIC_LIMIT = 80


def _today() -> date:
    return date.today()


def _count_days(clause: str) -> int | None:
    match = _DAYS_RE.search(clause)
    if not match:
        return None
    raw = match.group("n").lower()
    number = _NUMBER_WORDS.get(raw) or int(raw)
    return number * 7 if match.group("unit").lower().startswith("week") else number


def _day_argument(clause: str) -> str | None:
    """A single day the clause is about, as list_events and list_meetings accept it."""
    if re.search(r"\byesterday\b", clause, re.IGNORECASE):
        return "yesterday"
    if re.search(r"\btomorrow\b", clause, re.IGNORECASE):
        return "tomorrow"
    if re.search(r"\btoday\b|\btonight\b|\bthis\s+(?:morning|afternoon|evening)\b", clause, re.IGNORECASE):
        return "today"
    iso = _ISO_DATE_RE.search(clause)
    return iso.group() if iso else None


def _week_arguments(clause: str) -> dict[str, Any]:
    shift = 7 if re.search(r"\bnext\s+week\b", clause, re.IGNORECASE) else 0
    shift = -7 if re.search(r"\blast\s+week\b", clause, re.IGNORECASE) else shift
    if not shift:
        return {}  # list_events defaults to the current week
    today = _today()
    monday = today - timedelta(days=today.weekday()) + timedelta(days=shift)
    return {"start_date": monday.isoformat(), "end_date": (monday + timedelta(days=6)).isoformat()}


def _calendar_arguments(clause: str) -> dict[str, Any]:
    if re.search(r"\b(?:this|next|last)\s+week\b", clause, re.IGNORECASE):
        return _week_arguments(clause)
    day = _day_argument(clause)
    return {"start_date": day, "end_date": day} if day else {}


def _assignee(clause: str) -> str | None:
    match = _ASSIGNEE_RE.search(clause)
    if match is None:
        case_sensitive = _POSSESSIVE_ASSIGNEE_RE.search(clause)
        who = case_sensitive.group("who") if case_sensitive else None
        return who if who and who.lower() not in _NOT_NAMES else None
    first, second = match.group("first").rstrip(".'’"), match.group("second")
    if first.lower() in _NOT_NAMES:
        return None
    # "assigned to Marco Rossi" is one name; "assigned to Marco in ..." is not.
    if second and second[0].isupper():
        return f"{first} {second}"
    return first


def _list_project(clause: str, after: int) -> str | None:
    """'overdue tasks in Website relaunch' -> 'Website relaunch'."""
    for pattern, _ in _STATUS_WORDS[:2]:
        clause = pattern.sub(lambda m: " " * len(m.group()), clause)
    clause = _DAYS_RE.sub(lambda m: " " * len(m.group()), clause)
    for marker in _PROJECT_MARKER_RE.finditer(clause, after):
        rest = clause[marker.end() :]
        end = _PROJECT_END_RE.search(rest)
        name = _clean_query(rest[: end.start()] if end else rest)
        name = re.sub(r"\s+project$", "", name, flags=re.IGNORECASE).strip()
        words = name.split()
        if words and words[0].lower() not in _NOT_PROJECTS and not words[0].isdigit():
            return name
    return None


def _task_list_arguments(clause: str, tasks_at: int) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    project = _list_project(clause, max(tasks_at, 0))
    if project:
        arguments["project"] = project
    assignee = _assignee(clause)
    if assignee:
        arguments["assignee"] = assignee
    stale = _STALE_RE.search(clause)
    overdue = _OVERDUE_RE.search(clause)
    if stale:
        arguments["stale_days"] = _count_days(clause) or 7
    if overdue:
        arguments["overdue"] = True
    if not stale and not overdue:
        # Both filters leave DONE tasks out already; otherwise "my tasks" means the open ones.
        statuses: set[str] = set(_OPEN_STATUSES) if _MINE_RE.search(clause) else set()
        named: set[str] = set()
        for pattern, values in _STATUS_WORDS:
            if pattern.search(clause):
                named.update(values)
        statuses = named or statuses
        if statuses:
            arguments["status"] = [s for s in _STATUS_ORDER if s in statuses]
    return arguments


def _title_case_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _create_task_arguments(rest: str) -> dict[str, Any] | None:
    """'"Fix login bug" in Website relaunch, due 2026-03-01, high priority' -> create_task arguments."""
    arguments: dict[str, Any] = {}
    due = _DUE_RE.search(rest)
    if due:
        arguments["due_date"] = due.group("due").lower()
        rest = rest[: due.start()] + rest[due.end() :]
    priority = _PRIORITY_RE.search(rest)
    if priority:
        level = (priority.group("a") or priority.group("b") or priority.group("c")).upper()
        arguments["priority"] = "MEDIUM" if level == "NORMAL" else level
        rest = rest[: priority.start()] + rest[priority.end() :]
    assignee = _ASSIGN_TO_RE.search(rest)
    if assignee:
        who = assignee.group("who").rstrip(".,'’")
        if who.lower() not in _NOT_NAMES:
            arguments["assignee"] = who
        rest = rest[: assignee.start()] + rest[assignee.end() :]
    quoted = _QUOTED_RE.search(rest)
    if quoted:
        name = quoted.group("a") or quoted.group("b")
        rest = rest[: quoted.start()] + " " + rest[quoted.end() :]
        marker = _TASK_PROJECT_RE.search(" " + rest)
        project = (" " + rest)[marker.end() :] if marker else ""
    elif ":" in rest:
        # "add a task to Website relaunch: fix the login bug"
        before, _, name = rest.partition(":")
        marker = _TASK_PROJECT_RE.search(" " + before)
        project = (" " + before)[marker.end() :] if marker else ""
    else:
        # The project follows the last "in"/"to": "a task to fix the bug in login in Website relaunch".
        markers = list(_TASK_PROJECT_RE.finditer(rest))
        if not markers:
            return None
        last = markers[-1]
        name, project = rest[: last.start()], rest[last.end() :]
        name = re.sub(r"^\s*(?:to|for)\s+", "", name, flags=re.IGNORECASE)
    name = _clean_query(name)
    project = re.sub(r"\s+project$", "", _clean_query(project), flags=re.IGNORECASE)
    if not name or not project:
        return None
    return {"project": project, "name": _title_case_first(name), **arguments}


def _update_task_arguments(clause: str, task_id: int) -> dict[str, Any] | None:
    if not _UPDATE_VERB_RE.search(clause) or _ASKS_ABOUT_THE_PAST_RE.match(clause):
        return None
    arguments: dict[str, Any] = {"task_id": task_id}
    for pattern, status in _UPDATE_STATUS_WORDS:
        if pattern.search(clause):
            arguments["status"] = status
            break
    priority = _PRIORITY_RE.search(clause)
    if priority:
        level = (priority.group("a") or priority.group("b") or priority.group("c")).upper()
        arguments["priority"] = "MEDIUM" if level == "NORMAL" else level
    elif re.search(r"\burgent\b", clause, re.IGNORECASE):
        arguments["priority"] = "URGENT"  # "make task 5 urgent"
    return arguments if len(arguments) > 1 else None


def _platform(clause: str) -> str:
    for pattern, platform in _PLATFORMS:
        if pattern.search(clause):
            return platform
    return "linkedin"


def _post_topic(clause: str, after: int) -> str:
    rest = _PLATFORM_MENTION_RE.sub("", clause[after:])
    match = _TOPIC_RE.search(rest)
    if not match:
        return ""
    topic = _clean_query(match.group("topic"))
    topic = re.sub(r"\s+(?:on|for)\s+(?:linked\s*in|mastodon|blue\s*sky|twitter|x)$", "", topic, flags=re.I)
    if len(topic) > _TOPIC_LIMIT:
        topic = topic[:_TOPIC_LIMIT].rsplit(" ", 1)[0]
    return topic


def _launch_subject(topic: str) -> str:
    if re.search(r"\b(?:web\s*site|site|homepage)\b", topic, re.IGNORECASE):
        return "our new website"
    if re.search(r"\b(?:app|mobile)\b", topic, re.IGNORECASE):
        return "the new version of our app"
    rest = re.sub(r"\b(?:our|the|a|new|big|product|(?:re)?launch\w*|of|day)\b", " ", topic, flags=re.I)
    rest = " ".join(rest.split())
    # Only a name is worth repeating ("the launch of Acme Cloud"); "next week" or "event" is not.
    return rest if re.search(r"\b[A-Z0-9]", rest) else ""


def draft_post_text(topic: str, platform: str) -> str:
    """A believable post about `topic` that fits the platform's length limit."""
    short = platform in {"x", "bluesky"}
    if re.search(r"\b(?:re)?launch\w*|\bgo(?:es|ing)?[\s-]live\b|\brelease\w*", topic, re.IGNORECASE):
        subject = _launch_subject(topic)
        if short:
            return (
                f"Launch day! Say hello to {subject or 'what we have been building'}: faster, simpler and shaped "
                "by your feedback. Thank you to everyone who helped us get here – tell us what you think!"
            )
        opening = (
            f"Launch day! Today we're sharing {subject} with the world."
            if subject
            else "Launch day! After months of building, testing and listening, we're finally live."
        )
        return (
            f"{opening} "
            "It's faster, simpler and shaped at every step by feedback from the people who tried the early versions. "
            "A huge thank-you to the team who worked through long review threads and late fixes to get here. "
            "Take a look and tell us what you think – we read every comment."
        )
    subject = topic or "what our team has been working on"
    if short:
        return (
            f"A quick update on {subject}: we've put a lot of care into this and we're proud of where it landed. "
            "Thanks to everyone who shared feedback along the way!"
        )
    return (
        f"A quick update on {subject}. "
        "Our team has put a lot of care into this over the past weeks, and we're proud of where it has landed. "
        "Thank you to everyone who shared ideas and feedback along the way – it made the result better. "
        "We'd love to hear your thoughts."
    )


def _workspace_clause(clause: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(offset in clause, tool, arguments) for one clause."""
    create = _CREATE_TASK_RE.search(clause)
    # "Did Marco create a task for that?" asks; it must not create one.
    if create and not _ASKS_ABOUT_THE_PAST_RE.match(clause):
        arguments = _create_task_arguments(clause[create.end() :])
        # Without a name and a project there is nothing to create; the project list helps ask again.
        yield (create.start(), "create_task", arguments) if arguments else (create.start(), "list_projects", {})
        return
    post = _POST_RE.search(clause)
    if post:
        platform = _platform(clause)
        topic = _post_topic(clause, post.end())
        yield post.start(), "draft_social_post", {"platform": platform, "text": draft_post_text(topic, platform)}
        return
    task_id = _TASK_ID_RE.search(clause)
    if task_id:
        number = int(task_id.group("id"))
        update = _update_task_arguments(clause, number)
        yield (task_id.start(), "update_task", update) if update else (task_id.start(), "get_task", {"task_id": number})
    meeting_id = _MEETING_ID_RE.search(clause)
    if meeting_id:
        yield meeting_id.start(), "get_meeting", {"meeting_id": int(meeting_id.group("id"))}
    meeting = _MEETING_RE.search(clause)
    # "yesterday's meeting" is about what was said; "meetings this week" is about the calendar.
    past_meeting = meeting if meeting and (_MEETING_SUMMARY_RE.search(clause) or _PAST_RE.search(clause)) else None
    action_items = _ACTION_ITEMS_RE.search(clause)
    if not meeting_id and (past_meeting or action_items):
        day = _day_argument(clause)
        at = (past_meeting or action_items).start()  # type: ignore[union-attr]
        yield at, "list_meetings", ({"date": day} if day else {})
    calendar = _CALENDAR_RE.search(clause)
    if not calendar and meeting and not (meeting_id or past_meeting or action_items) and _ASKING_RE.search(clause):
        calendar = meeting  # "which meetings do I have tomorrow?", but not "the meeting is on Monday"
    if calendar:
        yield calendar.start(), "list_events", _calendar_arguments(clause)
    email = _EMAIL_RE.search(clause)
    if email:
        yield email.start(), "list_emails", ({"unread_only": True} if _UNREAD_RE.search(clause) else {})
    tasks = _TASKS_RE.search(clause) or _STALE_RE.search(clause) or _OVERDUE_RE.search(clause)
    if tasks and not (task_id and not _TASKS_RE.search(clause)):
        yield tasks.start(), "list_tasks", _task_list_arguments(clause, tasks.start())
    elif not tasks and not task_id:
        projects = _PROJECTS_RE.search(clause)
        if projects:
            yield projects.start(), "list_projects", {}


def match_workspace(message: str) -> Iterator[Intent]:
    text = blank_urls(message)
    for offset, clause in split_clauses(text):
        # "Search for the best to-do apps" or "summarize <url> about meeting notes" is not about
        # the workspace, even though it names tasks or meetings.
        if _SEARCH_RE.search(clause) or URL_RE.search(message[offset : offset + len(clause)]):
            continue
        for at, tool, arguments in _workspace_clause(clause):
            yield Intent(tool, WORKSPACE, arguments, offset + at)
