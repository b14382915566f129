"""Markdown → safe HTML, block by block.

Model and tool output is untrusted: python-markdown passes raw HTML through, so everything it
produces is cleaned by nh3 (no scripts, no event handlers, no images — an image URL can leak the
conversation — and links only to http/https/mailto, opening in a new tab).

Text is rendered one block at a time (paragraphs, lists, fences…). While a message streams,
finished blocks are pushed rendered and only the last, growing block travels as raw text; the
page renders a stored message through the very same split, so the streamed result and a reload
are identical by construction.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import markdown
import nh3

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "b",
    "i",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "sup",
    "sub",
    "kbd",
    "span",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "th": {"align"},
    "td": {"align"},
    "ol": {"start"},
}
_local = threading.local()


def _markdown() -> markdown.Markdown:
    # Markdown instances are not thread-safe; the worker renders from several threads.
    md = getattr(_local, "md", None)
    if md is None:
        md = markdown.Markdown(
            extensions=["fenced_code", "tables", "sane_lists", "nl2br"],
            extension_configs={"tables": {"use_align_attribute": True}},
            output_format="html",
        )
        _local.md = md
    return md


def sanitize(html: str) -> str:
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def render_block(text: str) -> str:
    md = _markdown()
    md.reset()
    return sanitize(md.convert(text))


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# A half-written line that may still become a list item ("-" → "- b", "2" → "2. b").
_LIST_ITEM_PREFIX = re.compile(r"(?:[-*+]|\d{1,9}[.)]?)")


@dataclass
class Block:
    start: int
    end: int


def split_blocks(text: str) -> list[Block]:
    """Spans of `text`, one per markdown block. Blank lines separate blocks, except inside a
    code fence and where a list goes on (a loose list stays one block)."""
    blocks: list[Block] = []
    start: int | None = None
    last_content_end = 0
    fence: str | None = None
    blank_seen = False
    first_line = ""
    offset = 0
    for line in text.split("\n"):
        line_start, line_end = offset, offset + len(line)
        offset = line_end + 1
        stripped = line.strip()
        if fence is not None:
            last_content_end = line_end
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            continue
        if not stripped:
            if start is not None:
                blank_seen = True
            continue
        if start is not None and blank_seen and not _continues(first_line, line):
            blocks.append(Block(start, last_content_end))
            start = None
        blank_seen = False
        if start is None:
            start = line_start
            first_line = line
        last_content_end = line_end
        match = _FENCE.match(line)
        if match:
            fence = match.group(1)
    if start is not None:
        blocks.append(Block(start, len(text)))
    return blocks


def _continues(first_line: str, line: str) -> bool:
    if not _LIST_ITEM.match(first_line):
        return False
    return bool(_LIST_ITEM.match(line)) or line.startswith((" ", "\t"))


@dataclass
class RenderedText:
    blocks: list[str]  # rendered HTML, one per finished block
    tail: str  # raw text of the block still being written ("" when complete)
    committed: int  # how many blocks are final


def render_text(text: str, *, complete: bool, already: int = 0) -> RenderedText:
    """Renders the finished blocks from number `already` on; the last block stays raw unless
    the text is complete."""
    spans = split_blocks(text)
    final = spans if complete else spans[:-1]
    if not complete and len(spans) > 1 and _LIST_ITEM_PREFIX.fullmatch(text[spans[-1].start :]):
        # The block before may be a list this line will continue: not final yet.
        final = spans[:-2]
    rendered = [render_block(text[span.start : span.end]) for span in final[already:]]
    tail = "" if complete or not spans else text[spans[len(final)].start :]
    return RenderedText(rendered, tail, len(final))
