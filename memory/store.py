"""Every read and write of memories, each scoped by the user they belong to: a memory id from
another user finds nothing, wherever the call comes from (a chat, a subagent, /v1, /mcp or the
account page)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists

from .models import MAX_CHARS, Memory, MemoryPreference


class Refused(ValueError):
    """What the caller asked cannot be done; the message says why, for the user or the model."""


NOT_FOUND = "No memory with that id."
OFF = "Memory is turned off in this user's account settings: nothing is saved or offered."


def is_enabled(user_id: int) -> bool:
    return not MemoryPreference.objects.filter(user_id=user_id, enabled=False).exists()


def set_enabled(user_id: int, enabled: bool) -> None:
    MemoryPreference.objects.update_or_create(user_id=user_id, defaults={"enabled": enabled})


def listing(user_id: int) -> list[Memory]:
    return list(Memory.objects.filter(owner_id=user_id)[: limit()])


def limit() -> int:
    return int(settings.MEMORY["MAX_PER_USER"])


def clean(text: object) -> str:
    """One fact on one line: control characters and runs of space go, the length is capped."""
    if not isinstance(text, str):
        raise Refused("A memory is a piece of text.")
    flat = "".join(c if unicodedata.category(c)[0] != "C" else " " for c in text)
    flat = " ".join(flat.split())
    if not flat:
        raise Refused("A memory cannot be empty.")
    if len(flat) > MAX_CHARS:
        raise Refused(f"A memory holds at most {MAX_CHARS} characters; save one short fact at a time.")
    return flat


def save(user_id: int, text: object) -> tuple[Memory, bool]:
    """The saved memory, and False when the user had it already (the same text is kept once)."""
    if not is_enabled(user_id):
        raise Refused(OFF)
    text = clean(text)
    with transaction.atomic():
        same = Memory.objects.filter(owner_id=user_id, text=text).first()
        if same is not None:
            return same, False
        if Memory.objects.filter(owner_id=user_id).count() >= limit():
            raise Refused(f"This user keeps {limit()} memories already: forget or update one first.")
        return Memory.objects.create(owner_id=user_id, text=text), True


def update(user_id: int, memory_id: object, text: object) -> Memory:
    found = get(user_id, memory_id)
    found.text = clean(text)
    found.save(update_fields=["text", "updated_at"])
    return found


def forget(user_id: int, memory_id: object) -> Memory:
    found = get(user_id, memory_id)
    found.delete()
    return found


def get(user_id: int, memory_id: object) -> Memory:
    if isinstance(memory_id, bool) or not isinstance(memory_id, int | str):
        raise Refused(NOT_FOUND)
    text = str(memory_id).strip().lstrip("m")
    if not text.isdigit() or len(text) > 18:
        raise Refused(NOT_FOUND)
    found = Memory.objects.filter(owner_id=user_id, pk=int(text)).first()
    if found is None:
        raise Refused(NOT_FOUND)
    return found


# Relevance -----------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+")
# Words that say nothing about what a message is about (English and German, the demo's two).
_STOP_WORDS = (
    "a an and are as at be but by can do does for from have how i if in is it me my of on or "
    "please that the this to was what when where which who why will with you your "
    "der die das und ist ich mir mich ein eine zu mit von wie was"
)
_STOP = frozenset(_STOP_WORDS.split())


def terms(text: str) -> set[str]:
    words = (w.casefold() for w in _WORD.findall(text))
    # A crude stem (plural s) so "answers" meets "answer"; enough for picking a few facts.
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if len(w) > 1 and w not in _STOP}


@dataclass(frozen=True)
class Offered:
    id: int
    text: str


def relevant(user_id: int, message: str, *, count: int, tokens: int) -> list[Offered]:
    """The user's memories for a turn: those sharing the rarest words with the message first
    (BM25-like weights over the user's own memories), then the most recent; at most `count`,
    and together at most `tokens` (estimated at three characters a token, on the safe side)."""
    if count <= 0 or tokens <= 0:
        return []
    # One query for the switch and the rows together: a turn pays for memory once.
    switched_off = MemoryPreference.objects.filter(user_id=user_id, enabled=False)
    mine = Memory.objects.filter(owner_id=user_id).exclude(Exists(switched_off))
    rows = list(mine.values_list("id", "text")[: limit()])
    if not rows:
        return []
    bags = [terms(text) for _, text in rows]
    frequency = Counter(term for bag in bags for term in bag)
    wanted = terms(message)

    def score(bag: set[str]) -> float:
        return sum(math.log(1 + len(rows) / frequency[t]) for t in wanted & bag)

    # Stable: rows come newest first, so equal scores keep recency.
    ranked = sorted(range(len(rows)), key=lambda i: -score(bags[i]))
    chosen: list[Offered] = []
    left = tokens
    for index in ranked:
        memory_id, text = rows[index]
        cost = len(text) // 3 + 8  # the text and its element
        if cost > left:
            continue
        chosen.append(Offered(memory_id, text))
        left -= cost
        if len(chosen) >= count:
            break
    return chosen
