"""What `POST /v1/chat/completions` accepts: OpenAI's request shape, checked with JSON Schema
before anything is stored, and turned into the conversation a turn runs with."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

MAX_MESSAGES = 500
MAX_TEXT = 200_000
MAX_TOOLS = 128
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

_TEXT_PART = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string", "maxLength": MAX_TEXT}},
}
_CONTENT = {
    "anyOf": [
        {"type": "string", "maxLength": MAX_TEXT},
        {"type": "array", "maxItems": 100, "items": _TEXT_PART},
        {"type": "null"},
    ]
}
_TOOL_CALL = {
    "type": "object",
    "required": ["id", "function"],
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 200},
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "arguments"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                "arguments": {"type": "string", "maxLength": MAX_TEXT},
            },
        },
    },
}
REQUEST = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1, "maxLength": 200},
        "stream": {"type": ["boolean", "null"]},
        "stream_options": {"type": ["object", "null"]},
        "messages": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_MESSAGES,
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {
                    "role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
                    "content": _CONTENT,
                    "name": {"type": "string", "maxLength": 200},
                    "tool_calls": {"type": ["array", "null"], "maxItems": MAX_TOOLS, "items": _TOOL_CALL},
                    "tool_call_id": {"type": "string", "maxLength": 200},
                },
            },
        },
        "tools": {
            "type": ["array", "null"],
            "maxItems": MAX_TOOLS,
            "items": {
                "type": "object",
                "required": ["type", "function"],
                "properties": {
                    "type": {"const": "function"},
                    "function": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "pattern": TOOL_NAME.pattern},
                            "description": {"type": "string", "maxLength": 10_000},
                            "parameters": {"type": "object"},
                            "strict": {"type": ["boolean", "null"]},
                        },
                    },
                },
            },
        },
        "tool_choice": {"anyOf": [{"enum": ["auto", "none", "required"]}, {"type": "object"}, {"type": "null"}]},
        # Tessera's own: keep the conversation in the user's chat list.
        "tessera": {
            "type": ["object", "null"],
            "properties": {"save": {"type": "boolean"}},
            "additionalProperties": False,
        },
        "user": {"type": "string", "maxLength": 200},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(REQUEST)


class RequestError(ValueError):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass
class Conversation:
    """A request's conversation as a turn runs it."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # user, assistant, tool (OpenAI)
    system: str = ""  # the caller's system and developer messages, joined
    question: str = ""  # the last user message's text: what the chat page shows as asked
    tools: list[dict[str, Any]] = field(default_factory=list)  # the caller's own tools


def parse(body: Any) -> tuple[dict[str, Any], Conversation]:
    """The validated request and its conversation, or RequestError naming what is wrong."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(body))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        raise RequestError(
            f"Invalid request: {error.message[:300]}" + (f" (at {where})" if where else ""), where or None
        )
    conversation = Conversation()
    system: list[str] = []
    offered: set[str] = set()
    for position, message in enumerate(body["messages"]):
        role = message["role"]
        text = _text(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            conversation.messages.append({"role": "user", "content": text})
            conversation.question = text
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            item: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                item["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": dict(c["function"])} for c in calls
                ]
                offered.update(c["id"] for c in calls)
            conversation.messages.append(item)
        else:
            call_id = message.get("tool_call_id")
            if not call_id or call_id not in offered:
                raise RequestError(
                    "A tool message must answer a tool call of an earlier assistant message.",
                    f"messages.{position}.tool_call_id",
                )
            conversation.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    if not any(m["role"] == "user" for m in conversation.messages):
        raise RequestError("The conversation needs at least one user message.", "messages")
    conversation.system = "\n\n".join(part for part in system if part)
    names = [tool["function"]["name"] for tool in body.get("tools") or []]
    if len(set(names)) != len(names):
        raise RequestError("Two tools have the same name.", "tools")
    for tool in body.get("tools") or []:
        function = tool["function"]
        if function["name"].startswith(("toolset__", "delegate_to_")):
            raise RequestError(f"The tool name {function['name']!r} is reserved by Tessera.", "tools")
        conversation.tools.append(
            {
                "type": "function",
                "function": {
                    "name": function["name"],
                    "description": function.get("description", ""),
                    "parameters": function.get("parameters") or {"type": "object", "properties": {}},
                },
            }
        )
    return body, conversation


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part["text"] for part in content)
