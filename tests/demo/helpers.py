"""Driving the offline demo model through LiteLLM exactly as the chat loop drives it, and the
workspace results its answers are built from.

Plain pytest, no Django: the demo package must not depend on it. The demo provider is
registered for the whole run by tests/conftest.py, as a worker registers it at start-up.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from datetime import date, timedelta
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

litellm.suppress_debug_info = True


MODEL = "demo/tessera"


TOKYO_AND_MATH = "What time is it in Tokyo, and what is 12*7?"


LIMIT_MESSAGE = "You have reached the maximum number of tool calls. Answer now without using any tools."


TOKYO_TIME = {
    "timezone": "Asia/Tokyo",
    "iso": "2026-11-22T23:52:00+09:00",
    "display": "23:52",
    "date": "Sunday, 22 November 2026",
    "utc_offset": "+09:00",
    "abbreviation": "JST",
}


def tool(toolset: str, name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": f"toolset__{toolset}__{name}",
            "description": f"{name} from {toolset}",
            "parameters": {"type": "object", "properties": {}},
        },
    }


ALL_TOOLS = [
    tool("clock_math", "current_time"),
    tool("clock_math", "calculate"),
    tool("exa", "search"),
    tool("web", "fetch_page"),
]


def user(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are Tessera."},
        {"role": "user", "content": text},
    ]


class Turn:
    """What one streamed response amounted to, accumulated the way the chat loop does it."""

    def __init__(self) -> None:
        self.text = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.chunks = 0
        self.arrivals: list[float] = []
        self.pieces: list[str] = []

    def add(self, chunk: Any) -> None:
        self.chunks += 1
        if getattr(chunk, "usage", None):
            self.usage = chunk.usage
        if not chunk.choices:
            return
        choice = chunk.choices[0]
        self.finish_reason = choice.finish_reason or self.finish_reason
        delta = choice.delta
        if delta.content:
            self.text += delta.content
            self.pieces.append(delta.content)
            self.arrivals.append(time.monotonic())
        for call in delta.tool_calls or ():
            slot = self.calls.setdefault(call.index, {"id": None, "name": None, "pieces": []})
            if call.id:
                slot["id"] = call.id
            if call.function.name:
                slot["name"] = call.function.name
            if call.function.arguments:
                slot["pieces"].append(call.function.arguments)

    def tool_calls(self) -> list[dict[str, Any]]:
        return [
            {
                "id": slot["id"],
                "name": slot["name"],
                "arguments": json.loads("".join(slot["pieces"]) or "{}"),
            }
            for _, slot in sorted(self.calls.items())
        ]

    def assistant_message(self) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": self.text or None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["arguments"]),
                    },
                }
                for call in self.tool_calls()
            ],
        }


async def astream(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = ALL_TOOLS,
    **kwargs: Any,
) -> Turn:
    kwargs.setdefault("tokens_per_second", 0)
    if tools is not None:
        kwargs["tools"] = tools
    turn = Turn()
    response = await litellm.acompletion(model=MODEL, messages=messages, stream=True, **kwargs)
    async for chunk in response:
        turn.add(chunk)
    return turn


def stream(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = ALL_TOOLS,
    **kwargs: Any,
) -> Turn:
    return asyncio.run(astream(messages, tools, **kwargs))


def tool_result(call: dict[str, Any], content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"role": "tool", "tool_call_id": call["id"], "content": text}


WORKSPACE_TOOLS = [
    tool("workspace", name)
    for name in (
        "list_projects",
        "list_tasks",
        "get_task",
        "create_task",
        "update_task",
        "list_events",
        "list_emails",
        "get_email",
        "list_meetings",
        "get_meeting",
        "draft_social_post",
    )
]


TASK_FIELDS = {"id", "name", "status", "priority", "dueDate", "assignee", "project", "updatedAt"}


COMPONENT_RE = re.compile(r'^:::component\{type="(?P<type>[a-z_]+)"\}\n(?P<json>[^\n]*)\n:::$', re.MULTILINE)


TODAY = date.today()


def days(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def stamp(offset: int, clock: str = "09:00:00") -> str:
    return f"{days(offset)}T{clock}+00:00"


# Shaped exactly like toolsets/workspace/tools.py returns them, with the sample data's content.
def task(
    id_: int, name: str, status: str, priority: str, due: int | None, assignee: str, project: str, idle: int
) -> dict[str, Any]:
    return {
        "id": id_,
        "name": name,
        "status": status,
        "priority": priority,
        "dueDate": days(due) if due is not None else None,
        "assignee": assignee,
        "project": project,
        "updatedAt": stamp(-idle, "13:49:32"),
    }


STALE_TASKS: dict[str, Any] = {
    "tasks": [
        task(14, "Competitor pricing review", "TODO", "LOW", -6, "Jordan Lee", "Q3 marketing", 30),
        task(8, "Push notification settings screen", "TODO", "MEDIUM", 14, "Lena Fischer", "Mobile app 2.0", 20),
        task(7, "Fix crash on Android 14 login", "TODO", "URGENT", -3, "Sam Okafor", "Mobile app 2.0", 15),
        task(2, "Migrate blog posts to the new CMS", "TODO", "MEDIUM", 10, "Marco Rossi", "Website relaunch", 12),
        task(12, "Book webinar speakers", "BLOCKED", "MEDIUM", 7, "Alex Kim", "Q3 marketing", 11),
        task(3, "Set up redirects for old URLs", "BLOCKED", "HIGH", -2, "Marco Rossi", "Website relaunch", 9),
    ],
    "count": 6,
    "projects": ["Mobile app 2.0", "Q3 marketing", "Website relaunch"],
}


WEEK_EVENTS: dict[str, Any] = {
    "events": [
        {
            "id": 1,
            "title": "Sprint planning",
            "start": stamp(-TODAY.weekday(), "10:00:00"),
            "end": stamp(-TODAY.weekday(), "11:00:00"),
            "attendees": ["Alice Moreau", "Sam Okafor", "Lena Fischer", "Jordan Lee"],
            "location": "Room Atlas",
        },
        {
            "id": 3,
            "title": "Homepage design review",
            "start": stamp(2 - TODAY.weekday(), "14:00:00"),
            "end": stamp(2 - TODAY.weekday(), "15:00:00"),
            "attendees": ["Alice Moreau", "Priya Natarajan", "Marco Rossi"],
            "location": "",
        },
        {
            "id": 6,
            "title": "Daily stand-up",
            "start": stamp(0, "09:30:00"),
            "end": stamp(0, "09:45:00"),
            "attendees": ["Alice Moreau", "Sam Okafor", "Priya Natarajan", "Marco Rossi"],
            "location": "Video call",
        },
    ],
    "count": 3,
    "startDate": days(-TODAY.weekday()),
    "endDate": days(6 - TODAY.weekday()),
}


UNREAD_EMAILS: dict[str, Any] = {
    "emails": [
        {
            "id": 1,
            "sender": {"name": "Priya Natarajan", "email": "priya@northwind.example"},
            "subject": "Homepage copy – v3 for review",
            "snippet": "Hi! v3 of the homepage copy is in the shared doc. I tightened the hero line and cut…",
            "receivedAt": stamp(0, "15:07:32"),
            "unread": True,
        },
        {
            "id": 3,
            "sender": {"name": "Dana Whitfield", "email": "dana@acme-corp.example"},
            "subject": "Re: Launch date for the new site",
            "snippet": "Thanks for the update. Our board meets at the end of the month, so a launch…",
            "receivedAt": stamp(0, "10:49:32"),
            "unread": True,
        },
    ],
    "count": 2,
    "unreadCount": 2,
    "unreadOnly": True,
}


YESTERDAYS_MEETINGS: dict[str, Any] = {
    "meetings": [
        {
            "id": 1,
            "title": "Website relaunch sync",
            "start": stamp(-1, "10:00:00"),
            "date": days(-1),
            "attendees": ["Alice Moreau", "Priya Natarajan", "Marco Rossi", "Dana Whitfield"],
            "summary": "Reviewed the relaunch timeline with Acme. Homepage copy is nearly final.",
            "actionItems": [
                {"text": "Send Dana a launch date with a buffer for redirects", "owner": "Alice Moreau", "done": False},
                {"text": "Share homepage copy v3 for review", "owner": "Priya Natarajan", "done": True},
            ],
        }
    ],
    "count": 1,
    "date": days(-1),
}


def saved_post(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": 3,
        "platform": arguments["platform"],
        "platformName": "LinkedIn",
        "text": arguments["text"],
        "status": "draft",
        "createdAt": stamp(0, "15:49:32"),
        "characters": len(arguments["text"]),
        "limit": 3000,
    }


def components(text: str) -> list[tuple[str, Any]]:
    return [(m["type"], json.loads(m["json"])) for m in COMPONENT_RE.finditer(text)]


def pieces_overlapping(turn: Turn, start: int, end: int) -> int:
    count, offset = 0, 0
    for piece in turn.pieces:
        if offset < end and offset + len(piece) > start:
            count += 1
        offset += len(piece)
    return count


def workspace_turns(question: str, result: Any) -> tuple[dict[str, Any], Turn]:
    """The tool call the question gets, and the final answer once `result` comes back."""
    messages = user(question)
    first = stream(messages, tools=WORKSPACE_TOOLS)
    assert first.finish_reason == "tool_calls"
    [call] = first.tool_calls()
    content = result(call["arguments"]) if callable(result) else result
    messages += [first.assistant_message(), tool_result(call, content)]
    final = stream(messages, tools=WORKSPACE_TOOLS)
    assert final.finish_reason == "stop"
    assert final.calls == {}
    return call, final


def assert_one_streamed_component(turn: Turn, kind: str) -> Any:
    [(found, data)] = components(turn.text)
    assert found == kind
    match = COMPONENT_RE.search(turn.text)
    assert match is not None
    assert pieces_overlapping(turn, match.start("json"), match.end("json")) >= 3, "the JSON must stream in pieces"
    # Text before and after the block, each separated from it by a blank line.
    assert turn.text[: match.start()].strip() and turn.text[: match.start()].endswith("\n\n")
    assert turn.text[match.end() :].startswith("\n\n") or not turn.text[match.end() :]
    return data
