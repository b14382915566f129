"""The demo model and memory: "remember that I prefer answers in German" saves a memory,
"what do you remember about me?" lists them; their results become a short answer."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .reading import Intent

MEMORY = "memory"
_SAVE = re.compile(
    r"^(?:(?:please|can\s+you|could\s+you|hey|ok(?:ay)?)[\s,]+)*"
    r"(?:remember|note|keep\s+in\s+mind|don'?t\s+forget)\s+(?:that\s+)?(?P<fact>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_LIST = re.compile(r"\bwhat\s+do\s+you\s+(?:remember|know)\s+about\s+me\b|\b(?:list|show)\s+(?:my\s+)?memories\b", re.I)
# First person to third, as a model saving a fact about the user would write it.
_PERSON: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"^(?:I\s+am|I'm)\b", re.I), "The user is"),
    (re.compile(r"^I\s+have\b"), "The user has"),
    (re.compile(r"^I\s+(\w+?)(y?)\b"), lambda m: "The user " + _verb(m[1], m[2])),
    (re.compile(r"^my\b", re.I), "The user's"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b", re.I), "them"),
    (re.compile(r"\bI\b"), "they"),
]


def _verb(stem: str, y: str) -> str:
    """ "prefer" → "prefers", "watch" → "watches", "study" → "studies"."""
    if y and stem and stem[-1] not in "aeiou":
        return stem + "ies"
    word = stem + y
    return word + ("es" if word.endswith(("s", "sh", "ch", "x", "o")) else "s")


def _third_person(fact: str) -> str:
    for pattern, replacement in _PERSON:
        fact = pattern.sub(replacement, fact)
    return fact[:1].upper() + fact[1:]


def intents(message: str) -> list[Intent]:
    own = " ".join(message.split())
    if _LIST.search(own):
        return [Intent("list_memories", MEMORY, {})]
    found = _SAVE.search(own)
    if not found:
        return []
    fact = found["fact"].strip(" .!?\"'“”")
    return [Intent("save_memory", MEMORY, {"text": _third_person(fact)[:500]})] if fact else []


def _plain(value: Any) -> str:
    return str(value or "").replace("*", "").replace("[", "(").replace("]", ")")


def _saved_block(data: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "saved" not in data:
        return None
    text = _plain(data.get("text"))
    lead = "Got it, I will remember that" if data["saved"] else "I remember that already"
    return f"{lead}: *{text}*. You can see, change or delete what I remember on your account page."


def _list_block(data: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    memories = data.get("memories")
    if not isinstance(memories, list):
        return None
    if not memories:
        return "I do not remember anything about you yet."
    lines = ["Here is what I remember about you:", ""]
    lines += [f"- {_plain(m.get('text'))}" for m in memories[:20] if isinstance(m, dict)]
    return "\n".join(lines)


RENDERERS = {"save_memory": _saved_block, "list_memories": _list_block}
