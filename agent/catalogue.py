"""Many tools, small prompts: past a budget (a number of tools, or their definitions' tokens),
the model is not sent every definition on every call. It gets a compact catalogue in the system
prompt (names and one-line descriptions, by toolset) and a `find_tools` tool; the definitions it
asks for are offered from its next step on, for the rest of the turn.

Plain Python: the loop (agent/loop.py) keeps what was found and asks this module what to
offer and what to add to the system prompt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

FIND_TOOL = "find_tools"
FIND_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FIND_TOOL,
        "description": "Get the full definitions of tools from the catalogue, by name or by words to search for; "
        "they can be called from your next step.",
        "parameters": {
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"}, "description": "Tool names, as listed."},
                "query": {"type": "string", "description": "Words to look for in names and descriptions."},
            },
        },
    },
}
# At most this many definitions per find_tools call: a vague query must not bring them all back.
MAX_FOUND = 10
DESCRIPTION_CHARS = 80
HEADING = (
    "Tools catalogue: these tools exist but their definitions are not loaded. To use one, call "
    f"{FIND_TOOL} with its name first; it can then be called from your next step."
)
# Names qualified by a toolset: "toolset__<toolset>__<tool>" (toolsets.base.qualified_name).
_QUALIFIED = re.compile(r"^toolset__(?P<toolset>.+?)__(?P<tool>.+)$")


@dataclass(frozen=True)
class ToolBudget:
    """Past `count` tools or `tokens` of definitions, the catalogue replaces them (0: no limit)."""

    count: int = 30
    tokens: int = 6000

    def exceeded(self, specs: list[dict[str, Any]], tokens: int) -> bool:
        return bool((self.count and len(specs) > self.count) or (self.tokens and tokens > self.tokens))


def name_of(spec: dict[str, Any]) -> str:
    return str(spec.get("function", {}).get("name", ""))


def group_of(name: str) -> str:
    match = _QUALIFIED.match(name)
    if match:
        return match["toolset"]
    if name.startswith("delegate_to_"):
        return "agents"
    return "tools"


def one_line(description: str) -> str:
    line = " ".join(str(description or "").split())
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return first if len(first) <= DESCRIPTION_CHARS else first[: DESCRIPTION_CHARS - 1].rstrip() + "…"


def catalogue(specs: list[dict[str, Any]]) -> str:
    """The compact catalogue: deterministic (sorted), so the prompt's prefix stays the same."""
    groups: dict[str, list[str]] = {}
    for spec in specs:
        name = name_of(spec)
        description = one_line(spec.get("function", {}).get("description", ""))
        groups.setdefault(group_of(name), []).append(f"- {name}" + (f": {description}" if description else ""))
    lines = [HEADING]
    for group in sorted(groups):
        lines.append(f"[{group}]")
        lines.extend(sorted(groups[group]))
    return "\n".join(lines)


def find(specs: list[dict[str, Any]], arguments: dict[str, Any]) -> tuple[list[str], str]:
    """(names found, the text the model reads): the definitions asked for by name, else those
    whose name or description has every word of the query."""
    names = arguments.get("names") or []
    query = arguments.get("query") or ""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not isinstance(query, str):
        return [], "Error: names must be a list of tool names and query a string"
    by_name = {name_of(spec): spec for spec in specs}
    found = [n for n in dict.fromkeys(names) if n in by_name]
    unknown = [n for n in names if n not in by_name]
    words = query.lower().split()
    if words:
        for spec in specs:
            text = f"{name_of(spec)} {spec.get('function', {}).get('description', '')}".lower()
            if all(word in text for word in words) and name_of(spec) not in found:
                found.append(name_of(spec))
    found = found[:MAX_FOUND]
    if not found:
        missing = f" Unknown: {', '.join(unknown)}." if unknown else ""
        return [], f"No tool matched.{missing} Use the names in the catalogue."
    definitions = [by_name[n]["function"] for n in found]
    text = (
        f"Found {len(found)} tool(s); they can be called from your next step:\n"
        + json.dumps(definitions, ensure_ascii=False)
        + (f"\nUnknown: {', '.join(unknown)}." if unknown else "")
    )
    return found, text
