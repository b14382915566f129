"""The demo model and the tools catalogue (agent/catalogue.py): past the tool budget the
model is offered only `find_tools` and reads the other tools' names in a catalogue at the end of
the system prompt. A real model that needs a catalogued tool looks it up with find_tools, then
calls it from its next step; the demo model does the same."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agent.catalogue import FIND_TOOL, HEADING

from .delegating import delegations
from .reading import Intent, offered_name

__all__ = ["FIND_TOOL", "catalogued", "lookup"]

# A catalogue line: "- <name>" or "- <name>: <one-line description>".
_ENTRY = re.compile(r"^- (?P<name>[^\s:]+)(?::|$)")


def _value(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def catalogued(messages: Sequence[Any]) -> list[str]:
    """The tool names the system prompt's catalogue lists (none without a catalogue)."""
    names: list[str] = []
    for message in messages:
        content = _value(message, "content")
        if _value(message, "role") != "system" or not isinstance(content, str) or HEADING not in content:
            continue
        for line in content.split(HEADING, 1)[1].splitlines():
            found = _ENTRY.match(line)
            if found:
                names.append(found["name"])
    return names


def keys(names: Sequence[str]) -> dict[tuple[str, str], str]:
    """(toolset id, tool suffix) → name, as the planner keys the tools on offer."""
    found: dict[tuple[str, str], str] = {}
    for name in names:
        if "__" in name:
            prefix, suffix = name.rsplit("__", 1)
            found[(prefix.removeprefix("toolset__"), suffix)] = name
    return found


def lookup(messages: Sequence[Any], offered: set[str], user_text: str, intents: Sequence[Intent]) -> list[str]:
    """The catalogued tools to look up before answering: those the request needs (the agents it
    would hand work to, else the tools its `intents` call) that are not on offer, when
    find_tools is. Empty otherwise."""
    if FIND_TOOL not in offered:
        return []
    listed = catalogued(messages)
    wanted = [name for _, name, _ in delegations(user_text, set(listed))]
    if not wanted:
        by_key = keys(listed)
        wanted = [name for name in (offered_name(by_key, intent) for intent in intents) if name]
    return [name for name in dict.fromkeys(wanted) if name not in offered]
