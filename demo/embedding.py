"""The demo embedding model (`demo/embed` through `litellm.embedding`): deterministic vectors
with a little meaning, for offline use and tests.

A text's vector is a hashed bag of its words, each word first reduced to a crude stem and then
to its concept when a small synonym map knows it ("erase", "remove" and "delete" are one
concept), L2-normalised. So "how do I erase a file" lands near a passage about deleting files
although they share no word: keyword search cannot find that, this can. It is no language
model: words outside the map only match themselves, and word order means nothing.
"""

from __future__ import annotations

import hashlib
import math
import re

DIMENSIONS = 256
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
# Words of one concept. Kept small and general: the demo must not know the tests' answers.
_SYNONYMS = [
    "delete remove erase discard drop purge wipe",
    "car automobile vehicle auto",
    "begin start launch commence",
    "stop halt end finish terminate",
    "big large huge enormous",
    "small little tiny",
    "fast quick rapid speedy",
    "buy purchase acquire",
    "help assist support aid",
    "error mistake fault failure problem",
    "picture image photo illustration",
    "link hyperlink url address",
    "heading header title headline",
    "space whitespace blank",
    "indent indentation",
    "list bullet enumeration",
    "code snippet source",
    "money payment cost price fee",
    "password passphrase credential secret",
    "setting option configuration preference parameter",
    "length long width",
    "tab tabulation",
    "emphasis emphasize bold italic",
]


def stem(word: str) -> str:
    """A crude stem: "deleting", "deleted", "deletes" and "delete" are all "delet"."""
    word = word.lower()
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def concept(word: str) -> str:
    root = stem(word)
    return _CONCEPT.get(root, root)


_CONCEPT = {stem(word): f"~{group.split()[0]}" for group in _SYNONYMS for word in group.split()}


def _bucket(term: str) -> tuple[int, float]:
    digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % DIMENSIONS, (1.0 if value >> 63 else -1.0)


def vector(text: str) -> list[float]:
    values = [0.0] * DIMENSIONS
    words = [w for w in (m.group().lower() for m in _WORD.finditer(text)) if w not in _STOP]
    for word in words:
        index, sign = _bucket(concept(word))
        values[index] += sign
    norm = math.sqrt(sum(v * v for v in values))
    if not norm:
        values[0] = 1.0  # an empty text still gets a unit vector
        return values
    return [v / norm for v in values]
