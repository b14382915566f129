"""The demo model and knowledge bases: "search the knowledge base for X", "what does the
handbook say about X", "ask our docs about X" become a Knowledge search, and its passages an
answer citing each one it quotes."""

from __future__ import annotations

import re
from typing import Any

from .reading import Intent

KNOWLEDGE = "knowledge"
_PLACE = r"(?:(?:the|our|my|team'?s?)\s+)?(?:knowledge(?:\s+bases?)?|kb|handbook|docs|documentation|wiki)"
_ASK = re.compile(
    rf"\b(?:search|look\s+(?:in|through)|check|ask)\s+{_PLACE}\s+(?:for|about|on)\s+(?P<query>.+)$"
    rf"|\bwhat\s+(?:does|do)\s+{_PLACE}\s+say\s+(?:about|on)\s+(?P<query2>.+)$"
    rf"|\b(?:according\s+to|in)\s+{_PLACE}\s*,\s*(?P<query3>.+)$",
    re.IGNORECASE | re.DOTALL,
)


def intents(message: str) -> list[Intent]:
    own = " ".join(message.split())
    found = _ASK.search(own)
    if not found:
        return []
    query = (found["query"] or found["query2"] or found["query3"] or "").strip(" ?.!\"'“”")
    return [Intent("search_knowledge", KNOWLEDGE, {"query": query})] if query else []


def _sentences(text: str, count: int) -> str:
    flat = " ".join(text.split())
    picked = " ".join(re.split(r"(?<=[.!?])\s+", flat)[:count])
    return picked if len(picked) <= 400 else picked[:399].rstrip() + "…"


def _mark(data: dict[str, Any], index: int) -> str:
    sources = data.get("sources")
    if isinstance(sources, list) and len(sources) > index and isinstance(sources[index], dict):
        number = sources[index].get("n")
        if isinstance(number, int):
            return f" [{number}]"
    return ""


def _plain(value: Any) -> str:
    return str(value or "").replace("*", "").replace("[", "(").replace("]", ")")


def _search_block(data: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    passages = data.get("passages")
    if not isinstance(passages, list) or "retrieval" not in data:
        return None
    query = _plain(data.get("query") or arguments.get("query"))
    if not passages:
        return f"The knowledge base has nothing about “{query}”."
    lines = [f"Here is what the knowledge base says about “{query}”:", ""]
    for index, hit in enumerate(passages[:5]):
        where = _plain(hit.get("title")) + (f" › {_plain(hit['heading'])}" if hit.get("heading") else "")
        lines.append(f"- **{where}**: “{_sentences(_plain(hit.get('text')), 2)}”{_mark(data, index)}")
    return "\n".join(lines)


RENDERERS = {"search_knowledge": _search_block}
