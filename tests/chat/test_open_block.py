"""The block still being written (chat/open_block.py, rendering.render_open): shown rendered
mid-stream, changed by appending text where it can, always equal to what a reload shows, and
sanitized like every finished block."""

from __future__ import annotations

import random
from html.parser import HTMLParser

import pytest

from chat import rendering
from chat.open_block import OpenBlock, TailPatch, insertion_point
from chat.presenters.fragments import StepText
from chat.rendering import render_open, render_text
from demo.answers import SLOW_TEXT
from demo.provider import text_pieces

STREAMED = {
    "demo_long_answer": SLOW_TEXT,
    "table": "Intro para.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nAfter the table.",
    "lists": "- one **bold** item\n- two\n  - nested deep\n  - more words here\n\n1. first\n2. second, with commas.",
    "hostile_html": (
        "Hi <script>alert(1)</script> and <img src=x onerror=alert(1)> [x](javascript:alert(1)) "
        '<b>bold</b> <a href="https://e.x" onclick="y">link</a> end'
    ),
    "code_with_language": "```python\ndef f(x):\n    return x + 1  # one more\n```\nDone with code.",
    "unclosed_fence": "Look:\n\n~~~\nstill open, never closed\nsecond line",
    "heading_then_text": "## A title here\nand then a paragraph, right below it.",
    "quote": "> quoted words here\n> and more of them\n\nAfter.",
}


class LivePage:
    """The tail element as the worker's patches leave it (a string for the DOM)."""

    def __init__(self) -> None:
        self.open = OpenBlock()
        self.blocks: list[str] = []
        self.tail = ""
        self.committed = 0
        self.patches: list[TailPatch] = []

    def update(self, text: str, *, complete: bool) -> None:
        rendered = render_text(text, complete=complete, already=self.committed)
        self.blocks.extend(rendered.blocks)
        self.committed = rendered.committed
        patch = self.open.update(rendered, complete=complete)
        if patch is not None:
            self.tail = patch.apply(self.tail)
            self.patches.append(patch)


def reloaded_tail(text: str) -> str:
    rendered = render_text(text, complete=False)
    return rendered.tail_html or (render_open(rendered.tail)[0] if rendered.tail else "")


def _pieces(text: str, seed: int | None) -> list[str]:
    if seed is None:
        return text_pieces(text)  # word-sized, as the demo model streams
    rng, pieces, position = random.Random(seed), [], 0
    while position < len(text):
        step = rng.randint(1, 7)
        pieces.append(text[position : position + step])
        position += step
    return pieces


@pytest.mark.parametrize("name", sorted(STREAMED))
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_the_live_tail_always_equals_a_reload_and_ends_as_the_full_render(name: str, seed: int | None) -> None:
    text, page, sent = STREAMED[name], LivePage(), ""
    for piece in _pieces(text, seed):
        sent += piece
        page.update(sent, complete=False)
        assert page.tail == reloaded_tail(sent), sent
    page.update(text, complete=True)
    assert "".join(page.blocks) == rendering.render_complete(text)
    assert page.tail == ""


def test_bold_a_list_and_code_show_formatted_before_their_block_ends() -> None:
    assert render_open("Some **bold** words and mo")[0] == "<p>Some <strong>bold</strong> words and mo</p>"
    assert "<li>second <strong>item</strong></li>" in render_open("- first\n- second **item**")[0]
    html, code = render_open("```python\ndef f():\n    return 1")
    assert code and "<pre>" in html and "return 1</code>" in html
    # No highlighting while the fence is open (it is highlighted once, when finished).
    assert "hl-k" not in html and "language-" not in html


@pytest.mark.parametrize(
    "tail",
    [
        "```\nopen",
        "````\nfour marks\n```\nstill open (three do not close four)",
        "~~~js\nlet a = 1;\n",
        "Intro\n```\ncode",
    ],
)
def test_an_unclosed_fence_renders_as_code(tail: str) -> None:
    html, code = render_open(tail)
    assert code
    assert "<code>" in html
    # The fence's own marks are not shown (only marks inside the code are code).
    assert not html.split("<code>", 1)[0].count("`") and "~~~" not in html


def test_a_closed_fence_is_not_open() -> None:
    assert render_open("```\ncode\n```")[1] is False


@pytest.mark.parametrize(
    "tail",
    [
        "<script>alert(1)</script> words",
        "<img src=https://evil.example/x.png onerror=alert(1)> words",
        "[click](javascript:alert(1)) words",
        '<a href="https://ok.example" onclick="steal()">ok</a> words',
        '<div class="stop-btn" id="stop-btn" data-turn="1">fake control</div>',
        "```\n<script>alert(1)</script>",
        "| a | b |\n|---|---|\n| <img src=x onerror=y> | <script>z</script>",
    ],
)
def test_html_in_the_open_block_stays_sanitized(tail: str) -> None:
    for cut in range(1, len(tail) + 1):
        found = Elements()
        found.feed(render_open(tail[:cut])[0])
        assert not {"script", "img", "iframe", "style"} & found.tags, tail[:cut]
        assert not [a for a in found.attributes if a.startswith("on") or a == "id" or a.startswith("data-turn")]
        assert not [v for v in found.hrefs if not v.startswith(("https:", "http:", "mailto:"))], tail[:cut]


class Elements(HTMLParser):
    """The elements, attribute names and link targets an HTML string holds (as a browser parses it)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            self.attributes.add(name)
            if name == "href":
                self.hrefs.append(value or "")


def test_a_table_shows_as_a_table_once_its_separator_row_is_there() -> None:
    assert "<table>" not in render_open("| a | b |")[0]
    html = render_open("| a | b |\n|---|---|\n| 1 | 2")[0]
    assert "<table>" in html and "<td>2</td>" in html


def test_plain_words_are_appended_without_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    page = LivePage()
    page.update("Hello there, my", complete=False)
    calls: list[str] = []
    real = rendering.render_block

    def counted(text: str) -> str:
        calls.append(text)
        return real(text)

    monkeypatch.setattr(rendering, "render_block", counted)

    page.update("Hello there, my friend", complete=False)
    page.update("Hello there, my friend, again.", complete=False)

    assert calls == []
    assert page.patches[-2:] == [TailPatch(False, " friend", 1), TailPatch(False, ", again.", 1)]
    assert page.tail == "<p>Hello there, my friend, again.</p>"


def test_markup_renders_the_block_again_and_sends_only_what_changed() -> None:
    page = LivePage()
    page.update("- one\n- two wo", complete=False)
    page.update("- one\n- two words", complete=False)
    assert page.patches[-1] == TailPatch(False, "rds", 2)
    page.update("- one\n- two words **now**", complete=False)
    assert page.patches[-1].replace  # the bold changed the item's HTML, not only its end
    assert page.tail == "<ul>\n<li>one</li>\n<li>two words <strong>now</strong></li>\n</ul>"


def test_code_grows_inside_its_code_element() -> None:
    page = LivePage()
    page.update("```\nx = 1", complete=False)
    page.update("```\nx = 1 + 2", complete=False)
    assert page.patches[-1] == TailPatch(False, " + 2", 3)
    assert page.tail.endswith("x = 1 + 2</code></pre></div>")


def test_the_append_selector_walks_last_children_from_the_tail() -> None:
    assert TailPatch(False, "x", 0).selector("tail-1-0") == "#tail-1-0"
    assert TailPatch(False, "x", 2).selector("tail-1-0") == "#tail-1-0>:last-child>:last-child"


def test_insertion_point_is_before_the_closing_tags() -> None:
    assert insertion_point("<p>a <strong>b</strong> c</p>") == (len("<p>a <strong>b</strong> c"), 1)
    assert insertion_point("<ul>\n<li>a</li>\n</ul>") == (len("<ul>\n<li>a"), 2)
    assert insertion_point("plain") is None


def test_step_text_fragments_append_inside_the_paragraph() -> None:
    step = StepText(7, 0)
    first, _ = step.fragments("Hello there", complete=False)
    assert 'id="tail-7-0"' in first and "<p>Hello there</p>" in first
    more, _ = step.fragments("Hello there friend", complete=False)
    assert more == '<div hx-swap-oob="beforeend:#tail-7-0>:last-child"> friend</div>'
    final, _ = step.fragments("Hello there friend.\n\n**Done**", complete=True)
    assert "<p>Hello there friend.</p>" in final and "<strong>Done</strong>" in final
    assert final.endswith('<div id="tail-7-0" class="md-tail" hx-swap-oob="true"></div>')
