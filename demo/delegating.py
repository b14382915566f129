"""The demo model as a supervisor and as a subagent.

As a supervisor (when `delegate_to_*` tools are offered) it hands "research X in depth" to the
Researcher and "plan my week…" to the Workspace assistant, both in parallel when a message asks
for both, and then answers from what they reported. As the Researcher it turns "Research X" into
a web search.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .answers import ToolResult
from .formatting import first_sentences
from .reading import EXA, Intent, _clean_query

DELEGATE = "delegate_to_"
RESEARCHER = DELEGATE + "researcher"
WORKSPACE_ASSISTANT = DELEGATE + "workspace_assistant"

_RESEARCH_RE = re.compile(
    r"\bresearch\s+(?P<topic>[^.;!?\n]+?)(?=\s*,?\s+and\s+(?:also\s+)?plan\b|\s*[.;!?\n]|\s*$)", re.IGNORECASE
)
_IN_DEPTH_RE = re.compile(r"\s+(?:in\s+depth|thoroughly|in\s+detail)$", re.IGNORECASE)
_PLAN_RE = re.compile(r"\bplan\s+(?:out\s+)?(?:my|the|our)\s+(?:week|next\s+week)\b[^.;!?\n]*", re.IGNORECASE)


def _topic(match: re.Match[str]) -> str:
    return _clean_query(_IN_DEPTH_RE.sub("", match.group("topic").strip()))


def delegations(text: str, offered: set[str]) -> list[tuple[int, str, dict[str, Any]]]:
    """(position, tool name, arguments) for each piece of the message a subagent should take."""
    found = []
    if RESEARCHER in offered:
        for match in _RESEARCH_RE.finditer(text):
            topic = _topic(match)
            if topic:
                found.append(
                    (
                        match.start(),
                        RESEARCHER,
                        {"task": f"Research {topic} in depth.", "context": f"The user asked: {text.strip()}"},
                    )
                )
    if WORKSPACE_ASSISTANT in offered:
        for match in _PLAN_RE.finditer(text):
            task = match.group().strip().rstrip(",")
            found.append(
                (
                    match.start(),
                    WORKSPACE_ASSISTANT,
                    {"task": task[0].upper() + task[1:] + ".", "context": f"The user asked: {text.strip()}"},
                )
            )
    return sorted(found, key=lambda item: item[0])


def research_intents(text: str) -> list[Intent]:
    """As the Researcher: "Research X in depth." is a web search for X."""
    first_line = text.strip().splitlines()[0] if text.strip() else ""
    match = _RESEARCH_RE.search(first_line)
    topic = _topic(match) if match else ""
    return [Intent("search", EXA, {"query": topic, "num_results": 5}, match.start())] if match and topic else []


def is_week_plan(text: str) -> bool:
    return bool(_PLAN_RE.search(text))


def delegation_answer(results: Sequence[ToolResult]) -> str:
    """The supervisor's answer once its subagents reported back."""
    parts = []
    for result in results:
        agent = result.name.removeprefix(DELEGATE).replace("_", " ").capitalize()
        content = result.content.strip()
        if content.startswith("Error"):
            parts.append(f"**{agent}** could not finish: {first_sentences(content, 1)}")
        else:
            parts.append(f"**{agent}** reports: {first_sentences(_plain(content), 3)}")
    parts.append("Their full reports, with sources, are in the cards above.")
    return "\n\n".join(parts)


def _plain(markdown: str) -> str:
    """The prose of a report, without headings or component blocks, for a short summary."""
    text = re.sub(r":::component\{[^}]*\}.*?:::", " ", markdown, flags=re.DOTALL)
    text = re.sub(r"^#+\s*", "", text, flags=re.MULTILINE)
    return " ".join(text.split())
