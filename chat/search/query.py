"""What a search box sends, made safe for the database, and the matches shown highlighted.

A query is cut into terms: runs of letters and digits, the same units the indexes are built
from (FTS5's unicode61 tokenizer on SQLite; on PostgreSQL the indexed text has every other
character replaced by a space first). Everything else — quotes, FTS operators, NUL, markup — is
a separator, so no input can change the meaning of the database query. Every term must match
the start of a word (results as you type match a half-typed last word).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

MAX_QUERY = 200
MAX_TERMS = 8
MAX_TERM = 64
# Only the start of a long message is indexed: a tsvector has a size limit, and a match deep
# inside a huge tool-made answer is rarely what anyone searches for.
INDEXED_CHARS = 100_000

_WORD = re.compile(r"[^\W_]+")
SNIPPET_BEFORE = 50
SNIPPET_LENGTH = 180


def terms(raw: str) -> list[str]:
    """The distinct search terms of a query, lower-cased, in order, at most MAX_TERMS."""
    found: list[str] = []
    for match in _WORD.finditer(raw[:MAX_QUERY]):
        term = match.group().lower()[:MAX_TERM]
        if term not in found:
            found.append(term)
        if len(found) == MAX_TERMS:
            break
    return found


def fts5_query(words: list[str]) -> str:
    """SQLite FTS5: every term as a quoted prefix (terms hold letters and digits only)."""
    return " AND ".join(f'"{w}"*' for w in words)


def tsquery(words: list[str]) -> str:
    """PostgreSQL to_tsquery: every term as a quoted prefix."""
    return " & ".join(f"'{w}':*" for w in words)


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def _matches(text: str, words: list[str]) -> list[Span]:
    spans = []
    for match in _WORD.finditer(text):
        word = match.group()
        lowered = word.lower()
        if len(lowered) != len(word):
            continue  # a character whose lower case has another length: no safe offsets
        best = max((w for w in words if lowered.startswith(w)), key=len, default=None)
        if best:
            spans.append(Span(match.start(), match.start() + len(best)))
    return spans


def highlight(text: str, words: list[str]) -> SafeString:
    """The whole text, escaped, with each matching word start in <mark>."""
    return _render(text, _matches(text, words), 0, len(text))


def snippet(text: str, words: list[str]) -> SafeString:
    """A short piece of the text around its first match, escaped, matches in <mark>."""
    flat = " ".join(text[:INDEXED_CHARS].split())
    spans = _matches(flat, words)
    if not spans:
        return _render(flat, [], 0, min(len(flat), SNIPPET_LENGTH))
    first = spans[0].start
    start = 0 if first <= SNIPPET_BEFORE else flat.rfind(" ", 0, first - SNIPPET_BEFORE) + 1
    end = min(len(flat), start + SNIPPET_LENGTH)
    if end < len(flat):
        cut = flat.rfind(" ", first, end)
        end = cut if cut > spans[0].end else end
    return _render(flat, spans, start, end)


def _render(text: str, spans: list[Span], start: int, end: int) -> SafeString:
    parts = ["…"] if start > 0 else []
    at = start
    for span in spans:
        if span.end <= at or span.start >= end:
            continue
        s, e = max(span.start, at), min(span.end, end)
        parts.append(escape(text[at:s]))
        parts.append(f"<mark>{escape(text[s:e])}</mark>")
        at = e
    parts.append(escape(text[at:end]))
    if end < len(text):
        parts.append("…")
    return mark_safe("".join(parts))  # every piece of text above is escaped
