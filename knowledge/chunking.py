"""Cutting a document's text into passages that keep their context. Plain Python.

Text comes from the readers in core/documents (Markdown as written, HTML with its headings as
`# …` lines, PDF pages one after the other). Headings open sections; each passage carries the
path of headings it sits under ("Install › Settings › Proxy"), which is searched with it and
shown with it. Inside a section, paragraphs are packed into passages of about TARGET characters,
never splitting a paragraph that fits, and a paragraph too long for one passage is cut at
sentence ends, else at spaces. A heading inside a fenced code block is code, not a heading.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

TARGET = 1000
LONGEST = 1600
MAX_HEADING = 480
SEPARATOR = " › "
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Passage:
    heading: str
    text: str
    start: int  # offset in the document's text, for its page
    page: int | None = None


@dataclass
class _Section:
    path: list[str]
    start: int
    lines: list[str]


def _sections(text: str) -> list[_Section]:
    sections = [_Section([], 0, [])]
    path: list[tuple[int, str]] = []
    fenced = False
    offset = 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line.rstrip("\n"))
        if heading:
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, " ".join(heading.group(2).split()))]
            sections.append(_Section([title for _, title in path], offset + len(line), []))
        else:
            sections[-1].lines.append(line)
        offset += len(line)
    return sections


def _pieces(paragraph: str) -> list[str]:
    """A paragraph as pieces no longer than LONGEST: whole when it fits, else by sentences, and
    a sentence longer than that by words (a word longer still is cut)."""
    if len(paragraph) <= LONGEST:
        return [paragraph]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        words = [sentence] if len(sentence) <= LONGEST else sentence.split(" ")
        for word in words:
            while len(word) > LONGEST:
                if current:
                    pieces.append(current)
                    current = ""
                pieces.append(word[:LONGEST])
                word = word[LONGEST:]
            joined = f"{current} {word}" if current else word
            if len(joined) > TARGET and current:
                pieces.append(current)
                current = word
            else:
                current = joined
    if current:
        pieces.append(current)
    return pieces


def chunk(text: str, page_starts: list[int] | None = None) -> list[Passage]:
    """The passages of a document, in reading order."""
    starts = page_starts or [0]
    passages: list[Passage] = []

    def page_at(offset: int) -> int | None:
        return bisect.bisect_right(starts, offset) if len(starts) > 1 else None

    for section in _sections(text):
        heading = SEPARATOR.join(section.path)[:MAX_HEADING]
        body = "".join(section.lines)
        current, current_start = "", section.start
        offset = section.start
        for paragraph_text in re.split(r"(\n[ \t]*\n)", body):
            paragraph = paragraph_text.strip()
            at = offset
            offset += len(paragraph_text)
            if not paragraph:
                continue
            for piece in _pieces(paragraph):
                if current and len(current) + 2 + len(piece) > TARGET:
                    passages.append(Passage(heading, current, current_start, page_at(current_start)))
                    current = ""
                if not current:
                    current_start = at
                current = f"{current}\n\n{piece}" if current else piece
        if current:
            passages.append(Passage(heading, current, current_start, page_at(current_start)))
    return passages
