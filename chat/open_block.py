"""The block still being written, on a live page: shown rendered, like the finished ones, and
changed in place as it grows (chat/presenters/fragments.py's StepText sends the changes).

Most of the time the block only grows by plain words at its end, and the page's tail element
takes just those words, appended inside the element that holds the block's last text (a
paragraph, a list item, a table cell, a code element; the fragment names it by a selector
of `:last-child` steps from the tail). Rendering Markdown for every batch would cost the worker
far more than the rest of the fragment, so words that cannot change the block's structure
(`_plain`: letters, digits, spaces and punctuation that opens or closes nothing, on a line whose
first word is written, right after a letter or digit the render shows) are appended without a
render. Anything else renders the block again: when the new HTML is the old one with text
added before its closing tags, only that text travels; otherwise the tail is replaced.

A page that reloads mid-answer renders the same (`rendering.render_open`), and the answer's end
always replaces the tail with the final render, so the last state equals what a reload shows."""

from __future__ import annotations

import html as htmllib
import re
from dataclasses import dataclass

from .rendering import RenderedText, render_open

# Punctuation that, added mid-line after a letter or digit, opens or closes no Markdown or HTML
# (not `*_`[]()<>&\|~#;` and no line break).
_PLAIN = re.compile(r"[^\W_]|[ ,.:?!'\"/%+=@$^{}-]")
_CODE_PLAIN = re.compile(r"[^\n`~]")
_LINE_STARTED = re.compile(r"\S[ \t]")
_LAST_WORD = re.compile(r"[^\n<>&*_`\[\]()\\|~#;]{1,12}$")
_CLOSING_RUN = re.compile(r"(?:</[a-z0-9]+>\s*)+$")
_CLOSING_TAG = re.compile(r"</[a-z0-9]+>")
_END = 256  # how far from the end of a block's HTML its closing tags are looked for
# Render again after this many appends without one, whatever came (a bound on any difference).
FULL_EVERY = 16


@dataclass(frozen=True)
class TailPatch:
    """How the tail element changes: `replace` its content with `html`, or append the text
    `html` inside the element `depth` levels down its last children."""

    replace: bool
    html: str
    depth: int = 0

    def selector(self, tail_id: str) -> str:
        return f"#{tail_id}" + ">:last-child" * self.depth

    def apply(self, shown: str) -> str:
        """The tail's HTML after this patch (what the page's DOM then holds, as a string)."""
        if self.replace:
            return self.html
        point = insertion_point(shown)
        assert point is not None and point[1] == self.depth
        return shown[: point[0]] + self.html + shown[point[0] :]


def insertion_point(html: str) -> tuple[int, int] | None:
    """Where text added at the end of the block goes (just before its closing tags), and how
    many elements deep that is; None when the block's HTML does not end in its text."""
    # Only the end is looked at: a block's closing tags are a few dozen characters, and the
    # search must not grow with the block.
    start = max(0, len(html) - _END)
    match = _CLOSING_RUN.search(html, start)
    if match is None or match.start() == 0 or (match.start() == start and start > 0):
        return None
    return match.start(), len(_CLOSING_TAG.findall(match.group()))


class OpenBlock:
    """What the page's tail element shows of one step's text, and the patches that change it."""

    def __init__(self) -> None:
        self.text = ""  # the tail's source as last shown
        self.html = ""  # the tail element's content
        self.code = False  # the block ends inside a code fence
        self.appended = 0  # appends since the last render

    def update(self, rendered: RenderedText, *, complete: bool) -> TailPatch | None:
        tail = rendered.tail
        if rendered.blocks or complete or rendered.tail_html:
            # A block finished (the tail starts again), the answer ended, or a component's
            # placeholder shows: the tail is set whole, exactly as a reload shows it.
            html, code = (rendered.tail_html, False) if rendered.tail_html or not tail else render_open(tail)
            self._set(tail, html)
            self.code = code
            return TailPatch(True, html)
        if tail == self.text:
            return None
        words = self._words(tail)
        if words is not None:
            return self._append(tail, words)
        html, self.code = render_open(tail) if tail else ("", False)
        old = self._set(tail, html)
        grown = _grown(old, html)
        if grown is not None:
            return TailPatch(False, *grown) if grown[0] else None
        return TailPatch(True, html)

    def _words(self, tail: str) -> str | None:
        """The HTML of what `tail` adds to the text shown, when it is plain words only."""
        if self.appended >= FULL_EVERY or not self.text or not tail.startswith(self.text):
            return None
        added = tail[len(self.text) :]
        last = self.text[-1:]
        if self.code:
            plain = all(_CODE_PLAIN.match(c) for c in added) and last not in ("", "\n")
        else:
            line = self.text.rpartition("\n")[2]
            plain = all(_PLAIN.match(c) for c in added) and bool(_PLAIN.match(last or "<"))
            # A heading drops its trailing spaces; any other line's structure is settled once
            # its first word is written.
            plain = plain and bool(_LINE_STARTED.search(line)) and not line.lstrip().startswith("#")
        if not plain:
            return None
        point = insertion_point(self.html)
        word = _LAST_WORD.search(self.text[-16:])
        if point is None or word is None or not self.html[: point[0]].endswith(htmllib.escape(word.group(), False)):
            return None  # the render does not end in the text as written (sanitized away…)
        return htmllib.escape(added, False)

    def _append(self, tail: str, words: str) -> TailPatch | None:
        self.text = tail
        self.appended += 1
        if not words:
            return None
        point = insertion_point(self.html)
        assert point is not None
        self.html = self.html[: point[0]] + words + self.html[point[0] :]
        return TailPatch(False, words, point[1])

    def _set(self, tail: str, html: str) -> str:
        """The tail now shows `html`; returns what it showed before."""
        old, self.text, self.html, self.appended = self.html, tail, html, 0
        return old


def _grown(old: str, new: str) -> tuple[str, int] | None:
    """(the text, its depth) when `new` is `old` with text added just before its closing tags."""
    point = insertion_point(old)
    if point is None or not new.startswith(old[: point[0]]) or not new.endswith(old[point[0] :]):
        return None
    added = new[point[0] : len(new) - (len(old) - point[0])]
    return (added, point[1]) if "<" not in added and len(new) >= len(old) else None
