"""Markdown → safe HTML, block by block.

Model and tool output is untrusted: python-markdown passes raw HTML through, so everything it
produces is cleaned by nh3 (no scripts, no event handlers, no images — an image URL can leak the
conversation — and links only to http/https/mailto, opening in a new tab).

Text is rendered one block at a time (paragraphs, lists, fences…). While a message streams,
finished blocks are pushed rendered, once, and the last, growing block shows rendered as it
stands (`render_open`; chat/open_block.py changes it in place); the page renders a stored
message through the very same split, so the streamed result and a reload are identical by
construction.

A component block (`:::component{type="…"}` … `:::`, see chat.components) is one block, like a
code fence, rendered as a card instead of Markdown. While it is still being written it stays in
the tail, and `RenderedText.tail_html` gives the placeholder the page shows instead of raw JSON;
a closed block is final as soon as the line after its `:::` begins.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path

import markdown
import nh3
from django.utils.html import escape

from . import components

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
    "div",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "th": {"align"},
    "td": {"align"},
    "ol": {"start"},
    "span": {"class"},
    "div": {"class"},
}
# Classes model output may carry: only what Markdown rendering itself adds (a fenced block's
# language, Pygments' token classes under their own `hl-` prefix and the `hl` box around a
# highlighted block). Anything else could impersonate the page's own controls (`stop-btn`, …).
_CODE_LANGUAGE = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")
_HIGHLIGHT_TOKEN = re.compile(r"hl-[a-z0-9]{1,4}")
HIGHLIGHT_CLASS = "hl"
_ALLOWED_CLASSES = {"code": _CODE_LANGUAGE, "span": _HIGHLIGHT_TOKEN}
# A highlighted code block, as sanitizing leaves it: it gets its copy button after cleaning, so
# the button is the page's own markup (model output can carry no data attribute).
_HIGHLIGHT_BOX = f'<div class="{HIGHLIGHT_CLASS}">'
_CODE_BOX = (
    f'<div class="{HIGHLIGHT_CLASS} code-block" data-code-block="">'
    '<button type="button" class="code-copy" data-copy-code="" aria-label="Copy code">Copy</button>'
)
_local = threading.local()


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "class":
        if tag == "div":
            return HIGHLIGHT_CLASS if value.split() == [HIGHLIGHT_CLASS] else None
        allowed = _ALLOWED_CLASSES.get(tag)
        kept = [token for token in value.split() if allowed and allowed.fullmatch(token)]
        return " ".join(kept[:1]) or None
    return value


def _markdown() -> markdown.Markdown:
    # Markdown instances are not thread-safe; the worker renders from several threads.
    md = getattr(_local, "md", None)
    if md is None:
        md = markdown.Markdown(
            extensions=["fenced_code", "codehilite", "tables", "sane_lists", "nl2br"],
            extension_configs={
                "tables": {"use_align_attribute": True},
                # Pygments, once, when a block is finished; the HTML is stored with the message.
                # Only blocks that name their language are highlighted (guessing is slow and
                # often wrong); token classes get a prefix of their own (static/css/highlight.css).
                "codehilite": {"css_class": HIGHLIGHT_CLASS, "guess_lang": False, "classprefix": "hl-"},
            },
            output_format="html",
        )
        _local.md = md
    return md


def sanitize(html: str) -> str:
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_keep_attribute,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def render_block(text: str) -> str:
    md = _markdown()
    md.reset()
    return sanitize(md.convert(text)).replace(_HIGHLIGHT_BOX, _CODE_BOX)


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# A half-written line that may still become a list item ("-" → "- b", "2" → "2. b").
_LIST_ITEM_PREFIX = re.compile(r"(?:[-*+]|\d{1,9}[.)]?)")


@dataclass
class Block:
    start: int
    end: int
    component: bool = False  # a component block, rendered as a card
    closed: bool = True  # False: a code fence or component block still open at the end of the text


def split_blocks(text: str) -> list[Block]:
    """Spans of `text`, one per markdown block. Blank lines separate blocks, except inside a
    code fence or a component block and where a list goes on (a loose list stays one block).
    A component block needs no blank lines around it: its opener line starts a new block and
    its closer line ends it. The opener counts only once its line is finished, so the block
    before it, once committed, can never change."""
    blocks: list[Block] = []
    start: int | None = None
    last_content_end = 0
    fence: str | None = None
    component = False
    blank_seen = False
    first_line = ""
    offset = 0
    lines = text.split("\n")
    for number, line in enumerate(lines):
        line_start, line_end = offset, offset + len(line)
        offset = line_end + 1
        stripped = line.strip()
        if component:
            last_content_end = line_end
            if components.CLOSER.match(line) and start is not None:
                blocks.append(Block(start, line_end, component=True))
                start, component = None, False
            continue
        if fence is None and number < len(lines) - 1 and components.opener_type(line) is not None:
            if start is not None:
                blocks.append(Block(start, last_content_end))
            start, component, blank_seen = line_start, True, False
            last_content_end = line_end
            continue
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
        blocks.append(Block(start, len(text), component=component, closed=fence is None and not component))
    return blocks


def _continues(first_line: str, line: str) -> bool:
    if not _LIST_ITEM.match(first_line):
        return False
    return bool(_LIST_ITEM.match(line)) or line.startswith((" ", "\t"))


def _open_fence(text: str) -> tuple[int, int, str] | None:
    """The opener line of a code fence still open at the end of `text` (its start, its end, and
    its indentation and fence marks), or None; fences toggle as in `split_blocks`."""
    fence, opener, offset = None, None, 0
    for line in text.split("\n"):
        start, offset = offset, offset + len(line) + 1
        stripped = line.strip()
        if fence is None:
            match = _FENCE.match(line)
            if match:
                fence, opener = match.group(1), (start, start + len(line), line[: match.end()])
        elif stripped.startswith(fence) and stripped.strip(fence[0]) == "":
            fence = None
    return opener if fence is not None else None


def render_open(tail: str) -> tuple[str, bool]:
    """The block still being written, rendered as it stands (the same renderer and sanitizer as
    a finished block), and whether it ends inside a code fence. An open fence is closed for the
    render, without its language (so it is highlighted once, when finished) and without the
    line break the closing adds, so the code's element ends where the next text goes."""
    opener = _open_fence(tail)
    if opener is None:
        return render_block(tail), False
    start, end, marks = opener
    html = render_block(f"{tail[:start]}{marks}{tail[end:]}\n{marks.strip()}")
    head, found, rest = html.rpartition("\n</code>")
    return (head + "</code>" + rest if found else html), True


@dataclass
class RenderedText:
    blocks: list[str]  # rendered HTML, one per finished block
    tail: str  # raw text of the block still being written ("" when complete)
    committed: int  # how many blocks are final
    # HTML to show in place of the raw tail when it is (or ends in) a component block still being
    # written: the escaped text before it, then its placeholder. "" when the tail is plain text.
    tail_html: str = ""
    # Where the first block not final yet starts (the end of the text when all are): the text
    # before it never changes how it splits, so the next call can start there.
    rest: int = 0


@cache
def fingerprint() -> str:
    """Identifies this renderer. A message's stored HTML made by another one (an older release,
    a changed component template) is rendered again instead of being shown."""
    from django.conf import settings

    digest = hashlib.sha256(f"{version('markdown')} {version('nh3')} {version('pygments')}".encode())
    sources = [Path(__file__), *sorted(Path(components.__file__).parent.rglob("*.py"))]
    sources += sorted((Path(settings.BASE_DIR) / "templates" / "components").glob("*.html"))
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def render_complete(text: str) -> str:
    """A finished message's HTML, as the page shows it (the streamed blocks, joined)."""
    return "".join(render_text(text, complete=True).blocks)


def render_text(text: str, *, complete: bool, already: int = 0, start: int = 0) -> RenderedText:
    """Renders the finished blocks from number `already` on; the last block stays raw unless
    the text is complete (or it is a component block whose closing line is finished).

    `start` (the `rest` of an earlier call on the beginning of this text) skips the blocks
    before it: they are neither split again nor counted, so a streaming step costs each flush
    the new text only, not the whole answer so far."""
    body = text[start:] if start else text
    spans = split_blocks(body)
    final = spans if complete else _final_spans(body, spans)
    rendered = [_render_span(body, span) for span in final[already:]]
    if len(final) == len(spans):
        return RenderedText(rendered, "", len(final), rest=len(text))
    first_open = spans[len(final)].start
    tail = body[first_open:]
    return RenderedText(rendered, tail, len(final), _tail_html(tail, spans[-1]), rest=start + first_open)


def _final_spans(text: str, spans: list[Block]) -> list[Block]:
    if not spans:
        return []
    last = spans[-1]
    if last.component and last.closed and text[last.end : last.end + 1] == "\n":
        return spans
    if len(spans) > 1 and not spans[-2].component and _LIST_ITEM_PREFIX.fullmatch(text[last.start :]):
        # The block before may be a list this line will continue: not final yet.
        return spans[:-2]
    return spans[:-1]


def _render_span(text: str, span: Block) -> str:
    source = text[span.start : span.end]
    return components.render(source) if span.component else render_block(source)


def _tail_html(tail: str, last: Block) -> str:
    if last.component:
        return components.render_placeholder(components.opener_type(tail.split("\n", 1)[0]))
    if not last.closed:
        return ""  # inside a code fence: a `:::component` line there is code
    # An opener still being typed: show the placeholder already, after any text of its block.
    head, _, line = tail.rpartition("\n")
    pending = components.pending_type(line)
    if pending is None:
        return ""
    return escape(head.rstrip()) + components.render_placeholder(pending)
