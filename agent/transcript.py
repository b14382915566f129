"""Keeping a transcript valid for any provider.

Providers are strict about what comes back to them: Anthropic and Gemini parse the arguments of
every earlier tool call, Anthropic wants tool-call ids unique across the conversation (and
matching `[A-Za-z0-9_-]+`, which LiteLLM enforces by replacing other characters), OpenAI wants
every call answered by exactly one tool message right after the assistant message that made
it, Gemini refuses empty text. The loop builds its messages by these rules; `canonical` applies
them to a stored conversation before it is replayed, so a chat stored by an older version, or
cut short by a dead worker, still gets answered.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from .types import transcript_arguments, transcript_name

NO_RESULT = "Error: this tool call has no result (the answer was interrupted before it finished)."
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class CallIds:
    """The tool-call ids of one transcript. A provider's id is kept exactly (Gemini encodes
    state in it) unless it is empty or already taken, counting ids that differ only in
    characters Anthropic's format replaces as taken too."""

    def __init__(self, existing: Iterable[str] = ()) -> None:
        self._keys: set[str] = set()
        for call_id in existing:
            self._keys.add(self._key(call_id))

    @staticmethod
    def _key(call_id: str) -> str:
        return _ID_UNSAFE.sub("_", call_id)

    def assign(self, proposed: str) -> str:
        call_id = proposed
        if not call_id or self._key(call_id) in self._keys:
            call_id = new_call_id()
        self._keys.add(self._key(call_id))
        return call_id


def call_ids(messages: Iterable[dict[str, Any]]) -> list[str]:
    return [
        str(call.get("id") or "")
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
    ]


def canonical(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a provider accepts it: every call with a unique id and JSON-object
    arguments, answered once right after its message (a missing result becomes an error
    result, a result for no call is dropped); assistant messages with nothing in them dropped."""
    ids = CallIds()
    results: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            results.setdefault(str(message.get("tool_call_id") or ""), []).append(index)
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            continue  # placed after the call it answers, or dropped as an orphan
        if role != "assistant":
            out.append(message)
            continue
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict) and _name(c)]
        content = message.get("content") or None
        if not calls:
            if content:
                out.append({"role": "assistant", "content": content})
            continue
        fixed: list[dict[str, Any]] = []
        answers: list[dict[str, Any]] = []
        for call in calls:
            original = str(call.get("id") or "")
            new_id = ids.assign(original)
            function = call.get("function") or {}
            fixed.append(
                {
                    "id": new_id,
                    "type": "function",
                    "function": {
                        "name": transcript_name(_name(call)),
                        "arguments": transcript_arguments(_text(function)),
                    },
                }
            )
            result = _take_result(messages, results.get(original) if original else None, index)
            answers.append({"role": "tool", "tool_call_id": new_id, "content": result or NO_RESULT})
        out.append({"role": "assistant", "content": content, "tool_calls": fixed})
        out.extend(answers)
    return out


def _name(call: dict[str, Any]) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def _text(function: dict[str, Any]) -> str:
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        return json.dumps(arguments)
    return arguments if isinstance(arguments, str) else ""


def _take_result(messages: list[dict[str, Any]], positions: list[int] | None, after: int) -> str | None:
    """The content of the first unused tool message after position `after` among `positions`
    (the tool messages answering one id, in order), which it uses up: an id a provider reused
    pairs its calls and results in order."""
    while positions:
        index = positions.pop(0)
        if index > after:
            content = messages[index].get("content")
            return content if isinstance(content, str) and content else "(empty result)"
    return None
