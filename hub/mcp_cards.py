"""Tessera's cards for a tool's result at `/mcp`, as the page shows them: the HTML an MCP Apps host's
View (hub/mcp_apps.py) places, for a client that negotiated the extension.

- Which card a tool's result makes: the Workspace's tools make the component cards the chat's
  answers show for them (a task table for its task list, an agenda for its events…); a tool that
  cites what it read makes the Sources list shown under an answer; an Ask tool the caller may not
  approve itself shows, while it waits, the approval card (what is being approved, and the link to
  Tessera's approval page, where its owner answers).
- How: the same path as the page. A component is written as the block the model writes
  (`:::component{type=…}`) and rendered by `chat.components.render` (validated, autoescaped
  partials, nh3), so the card is the page's card byte for byte. The Sources list and the approval
  card are Django partials too, cleaned by nh3 with an allow-list of what they use.

The component data is taken from the result as the demo model takes it for the chat's answers
(demo/formatting.py, which sits apart and cannot share this code): the fields each card's schema
names, under the card's own names.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nh3
from django.template.loader import render_to_string

from chat.components import all_components
from chat.components import render as render_component

log = logging.getLogger(__name__)

APPROVAL = "approval"
SOURCES = "sources"


@dataclass(frozen=True)
class Card:
    """A card type offered as an MCP App: its resource and how a result becomes its data."""

    kind: str  # a component type, "sources" or "approval"
    uri: str
    title: str
    description: str


CARDS: dict[str, Card] = {
    card.kind: card
    for card in (
        Card("task_table", "ui://tessera/task-table", "Task table", "Tasks as a table, as Tessera's chat shows them."),
        Card("task_card", "ui://tessera/task-card", "Task card", "One task with its status, priority and due date."),
        Card("calendar_events", "ui://tessera/calendar", "Calendar", "Events as an agenda, grouped by day."),
        Card("email_summary", "ui://tessera/email", "Email", "Emails with sender, subject and a snippet."),
        Card("meeting_summary", "ui://tessera/meeting", "Meeting", "A meeting's summary and action items."),
        Card("social_post", "ui://tessera/post-preview", "Post preview", "A social post as it would look."),
        Card(SOURCES, "ui://tessera/sources", "Sources", "What a tool's result was drawn from, numbered."),
        Card(APPROVAL, "ui://tessera/approval", "Approval", "A call waiting for its owner's approval."),
    )
}
BY_URI = {card.uri: card for card in CARDS.values()}


# --- Tool results → component data ------------------------------------------------------------


def _fields(kind: str, item: dict[str, Any], renamed: dict[str, str] | None = None) -> dict[str, Any]:
    """The fields this card's schema names, from a result's item (None and absent left out)."""
    schema = all_components()[kind].schema
    properties = (schema.get("items") or schema)["properties"]
    source = {**item, **{card: item.get(own) for card, own in (renamed or {}).items()}}
    return {key: source[key] for key in properties if source.get(key) is not None}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _tasks(result: dict[str, Any]) -> Any:
    return [_fields("task_table", task) for task in _dicts(result.get("tasks"))] if "tasks" in result else None


def _task(result: dict[str, Any]) -> Any:
    return _fields("task_card", result) if "name" in result and "status" in result else None


def _events(result: dict[str, Any]) -> Any:
    if "events" not in result:
        return None
    return [_fields("calendar_events", event) for event in _dicts(result["events"])]


def _sender(sender: Any) -> str:
    if isinstance(sender, dict):
        return str(sender.get("name") or sender.get("email") or "")
    return str(sender or "")


def _emails(result: dict[str, Any]) -> Any:
    if "emails" not in result:
        return None
    return [
        {
            **_fields("email_summary", email, {"date": "receivedAt"}),
            "from": _sender(email.get("sender")),
            "unread": bool(email.get("unread")),
        }
        for email in _dicts(result["emails"])
    ]


def _meeting_data(meeting: dict[str, Any]) -> dict[str, Any]:
    data = _fields("meeting_summary", meeting)
    data["date"] = meeting.get("date") or str(meeting.get("start") or "")[:10] or None
    data["summary"] = meeting.get("summary") or ""
    data["actionItems"] = [
        {"text": item.get("text"), "owner": item.get("owner"), "done": bool(item.get("done"))}
        for item in _dicts(meeting.get("actionItems"))
    ]
    return {key: value for key, value in data.items() if value is not None}


def _meetings(result: dict[str, Any]) -> Any:
    # The chat's answer shows the latest (or the asked day's first) meeting; so does the card.
    found = _dicts(result.get("meetings"))
    return _meeting_data(found[0]) if found else None


def _meeting(result: dict[str, Any]) -> Any:
    return _meeting_data(result) if "title" in result and "actionItems" in result else None


def _post(result: dict[str, Any]) -> Any:
    if "text" not in result or "platform" not in result:
        return None
    # The Workspace does not know the user's display name, and the card wants one.
    return {"platform": result.get("platform"), "author": "You", "text": result.get("text")}


# (toolset, tool) → (component type, result → its data, or None when the result is not one).
TOOL_CARDS: dict[tuple[str, str], tuple[str, Callable[[dict[str, Any]], Any]]] = {
    ("workspace", "list_tasks"): ("task_table", _tasks),
    ("workspace", "get_task"): ("task_card", _task),
    ("workspace", "create_task"): ("task_card", _task),
    ("workspace", "update_task"): ("task_card", _task),
    ("workspace", "list_events"): ("calendar_events", _events),
    ("workspace", "list_emails"): ("email_summary", _emails),
    ("workspace", "list_meetings"): ("meeting_summary", _meetings),
    ("workspace", "get_meeting"): ("meeting_summary", _meeting),
    ("workspace", "draft_social_post"): ("social_post", _post),
}


def card_for(toolset_id: str, tool: Any, *, asks: bool) -> Card | None:
    """The card a tool's result shows in an MCP host: its component, else its sources, else (an
    Ask tool the caller waits on) the approval card; None for a tool without one."""
    found = TOOL_CARDS.get((toolset_id, tool.name))
    if found is not None:
        return CARDS[found[0]]
    if getattr(tool, "sources", None) is not None:
        return CARDS[SOURCES]
    return CARDS[APPROVAL] if asks else None


# --- Rendering --------------------------------------------------------------------------------


def component_html(toolset_id: str, tool_name: str, result: Any) -> str:
    """The component card the page shows for this result, or "" (not a card's result)."""
    found = TOOL_CARDS.get((toolset_id, tool_name))
    if found is None or not isinstance(result, dict):
        return ""
    kind, build = found
    try:
        data = build(result)
    except Exception:  # a result of an unexpected shape costs its card, never the call
        log.exception("the %s card of %s could not be built", kind, tool_name)
        return ""
    if data is None:
        return ""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    # One line of JSON between the opener and the closer, as the model writes it: no line of the
    # data can close the block early.
    block = f':::component{{type="{kind}"}}\n{payload}\n:::'
    return render_component(block)


# What the Sources list and the approval card use, and nothing else.
_TAGS = {"section", "div", "h3", "p", "ol", "li", "a", "span", "strong", "pre", "code", "dl", "dt", "dd", "time"}
_ATTRIBUTES = {
    "*": {"class", "role", "id", "tabindex"},
    "a": {"href", "target"},
    "li": {"value"},
    "time": {"datetime"},
}
_CLASS_TOKEN = re.compile(r"(?:gu-|gen-ui|sources|source)[\w-]*")


def _keep(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "class":
        return " ".join(token for token in value.split() if _CLASS_TOKEN.fullmatch(token)) or None
    return value


def _clean(html: str) -> str:
    return nh3.clean(
        html.strip(),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        attribute_filter=_keep,
        generic_attribute_prefixes={"aria-", "data-"},
        url_schemes={"http", "https"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


def sources_html(sources: Sequence[Mapping[str, Any]], base_url: str) -> str:
    """The Sources list under an answer (chat/_sources.html), its links absolute for a host."""
    shown = []
    for source in sources:
        url = str(source.get("url") or "")
        if url.startswith("/") and not url.startswith("//"):
            url = base_url.rstrip("/") + url  # an attached file's page on this site
        elif not url.startswith(("http://", "https://")):
            url = ""
        shown.append({**source, "url": url, "dom_id": f"source-{source.get('n')}"})
    if not shown:
        return ""
    return _clean(render_to_string("chat/_sources.html", {"sources": shown, "turn_id": "mcp", "oob": False}))


def approval_html(pending: dict[str, Any], review_url: str) -> str:
    """The approval card: what is being approved, until when, and the page where its owner answers."""
    arguments = pending.get("arguments") or {}
    context = {
        "display_name": pending.get("display_name") or pending.get("name") or "A tool",
        "arguments": json.dumps(arguments, ensure_ascii=False, indent=2, default=str) if arguments else "",
        "deadline": pending.get("deadline_iso") or "",
        "deadline_text": pending.get("deadline_text") or "",
        "url": review_url,
    }
    return _clean(render_to_string("hub/mcp_approval_card.html", context))
