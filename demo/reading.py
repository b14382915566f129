"""What the demo model wants to do (`Intent`) and how it reads a message: URLs, clauses, queries.
Shared by the matchers in intents.py and their own modules (units.py, workspace_intents.py), which
intents.py imports: none of them imports intents.py back."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

CLOCK_MATH = "clock_math"
EXA = "exa"
WEB = "web"
WORKSPACE = "workspace"


@dataclass(frozen=True)
class Intent:
    """One tool call the demo model wants to make."""

    tool: str  # suffix after the last "__" of the offered tool name
    toolset: str
    arguments: dict[str, Any] = field(hash=False)
    # Offset in the message, so parallel calls come out in reading order.
    position: int = 0


Matcher = Callable[[str], Iterable[Intent]]


def offered_name(offered: dict[tuple[str, str], str], intent: Intent) -> str | None:
    """The offered function that serves `intent`. An intent for an MCP server's tool is served
    by that tool on whichever MCP toolset offers it: an admin may register the same server under
    another name."""
    found = offered.get((intent.toolset, intent.tool))
    if found is None and intent.toolset.startswith("mcp_"):
        found = next(
            (name for (ts, tool), name in sorted(offered.items()) if ts.startswith("mcp_") and tool == intent.tool),
            None,
        )
    return found


# --- shared text helpers ---------------------------------------------------

URL_RE = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_URL_TRAILING_PUNCTUATION = ".,;:!?)]}'\""

# A clause ends at sentence punctuation, or at "and"/"also"/"then" followed by a
# new request ("..., and what is 12*7"). Splitting on a bare "and" would break
# "Tokyo and London" apart, which must stay one request with two places.
_CLAUSE_BREAK_RE = re.compile(
    r"[?!;\n]|\.(?=\s|$)"
    r"|,?\s+(?:and|also|then|plus)\s+(?=(?:also\s+)?(?:what|what's|whats|how|search|look|find|fetch|read|open"
    r"|summari[sz]e|get|tell|calculate|compute|give|show|check|draft|write|compose|create|add|list|mark|any)\b)",
    re.IGNORECASE,
)


def find_urls(text: str) -> list[tuple[int, str]]:
    """Return (offset, url) pairs, without the sentence punctuation glued to them."""
    found = []
    for match in URL_RE.finditer(text):
        found.append((match.start(), match.group().rstrip(_URL_TRAILING_PUNCTUATION)))
    return found


def blank_urls(text: str) -> str:
    # Same length as the input so offsets found afterwards still point into the message.
    return URL_RE.sub(lambda m: " " * len(m.group()), text)


def split_clauses(text: str) -> Iterator[tuple[int, str]]:
    """Yield (offset, clause) pairs; URLs must be blanked first (they contain dots)."""
    start = 0
    for match in _CLAUSE_BREAK_RE.finditer(text):
        if match.start() > start:
            yield start, text[start : match.start()]
        start = match.end()
    if start < len(text):
        yield start, text[start:]


def _clean_query(raw: str) -> str:
    query = " ".join(raw.split()).strip(" \t,.;:!?\"'“”‘’")
    query = re.sub(r"^(?:the|a|an)\s+(?=\S)", "", query, flags=re.IGNORECASE)
    query = re.sub(r"\s+(?:please|for me|thanks|thank you)$", "", query, flags=re.IGNORECASE)
    return query.strip(" \t,.;:!?\"'“”‘’")


# Asking for a web search ("search for …", "look up …"); the workspace matcher reads it too.
_SEARCH_RE = re.compile(
    r"\b(?:search(?:\s+(?:the\s+web|the\s+internet|online|google|exa))?\s+for|search(?:\s+the\s+web)?\s+(?=\w)"
    r"|look\s+up|lookup|google|find\s+(?:me\s+)?(?:information|info|articles?|sources?|anything|something)"
    r"\s+(?:on|about|for|regarding))\s+(?P<query>.+)",
    re.IGNORECASE,
)
