"""A component block while its message streams: placeholders in the tail, and a live page that
ends as the full render (chat/components/renderer.py through chat/rendering.py)."""

from __future__ import annotations

import random

import pytest

from chat.components import COMPONENTS, render, render_placeholder
from chat.open_block import OpenBlock
from chat.rendering import render_open, render_text

from .helpers import TABLE, block, full


class LivePage:
    """The page as the worker updates it (chat/worker/streaming.py): finished blocks are appended once,
    the tail element changes as `OpenBlock` says."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.tail = ""  # the tail element's content
        self.committed = 0
        self.open = OpenBlock()

    def update(self, text: str, *, complete: bool) -> None:
        rendered = render_text(text, complete=complete, already=self.committed)
        assert rendered.committed >= self.committed, f"committed went back at {text!r}"
        self.blocks.extend(rendered.blocks)
        patch = self.open.update(rendered, complete=complete)
        if patch is not None:
            self.tail = patch.apply(self.tail)
        self.committed = rendered.committed


def reloaded(text: str) -> tuple[str, str]:
    """What a page rendered from the live state shows (chat/presenters/ + _step.html)."""
    rendered = render_text(text, complete=False)
    return "".join(rendered.blocks), rendered.tail_html or (render_open(rendered.tail)[0] if rendered.tail else "")


STREAMED = {
    "table_between_paragraphs": f"Here is the sprint:\n\n{TABLE}\n\nThe blocked one waits on Stripe.",
    "no_blank_lines": f"Tasks:\n{TABLE}\nThat's all.",
    "several": "\n\n".join(
        [
            "Your day:",
            block("calendar_events", COMPONENTS["calendar_events"].example, indent=2),
            block("email_summary", COMPONENTS["email_summary"].example),
            "- a list\n- after the cards",
            block("social_post", COMPONENTS["social_post"].example),
        ]
    ),
    "invalid_then_valid": f"{block('task_table', [{'name': 1}])}\n\n{TABLE}",
    "ends_with_a_block": f"Here:\n\n{TABLE}",
    "not_a_block": ':::note\nKeep calm.\n:::\n\na ::: b\n\n```\n:::component{type="task_table"}\n[]\n:::\n```\n\nEnd.',
    "false_start": ':::component{type="task_table"} is how you open a card.\n\nDone.',
}


def _cuts_char_by_char(text: str) -> list[int]:
    return list(range(1, len(text) + 1))


def _cuts_random(text: str, seed: int) -> list[int]:
    rng = random.Random(seed)
    cuts, position = [], 0
    while position < len(text):
        position = min(len(text), position + rng.randint(1, 15))
        cuts.append(position)
    return cuts


@pytest.mark.parametrize("name", sorted(STREAMED))
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_streaming_with_components_ends_as_the_full_render_and_matches_a_reload(name: str, seed: int | None) -> None:
    text = STREAMED[name]
    page = LivePage()
    cuts = _cuts_char_by_char(text) if seed is None else _cuts_random(text, seed)
    for cut in cuts:
        page.update(text[:cut], complete=False)
        assert ("".join(page.blocks), page.tail) == reloaded(text[:cut]), text[:cut]

    page.update(text, complete=True)

    assert "".join(page.blocks) == full(text)
    assert page.tail == ""


@pytest.mark.parametrize("name", sorted(STREAMED))
def test_while_a_block_streams_the_page_shows_a_placeholder_not_json(name: str) -> None:
    text = STREAMED[name]
    page = LivePage()
    for cut in range(1, len(text) + 1):
        page.update(text[:cut], complete=False)
        assert '"name"' not in page.tail and "&quot;name&quot;" not in page.tail, text[:cut]
        assert '"title"' not in page.tail and "&quot;title&quot;" not in page.tail, text[:cut]


def test_an_open_block_is_a_placeholder_in_the_tail() -> None:
    rendered = render_text('Intro.\n\n:::component{type="task_table"}\n[{"name": "Fix', complete=False)

    assert rendered.blocks == ["<p>Intro.</p>"]
    assert rendered.tail.startswith(":::component")
    assert rendered.tail_html == render_placeholder("task_table")
    assert "Building task table…" in rendered.tail_html
    assert 'role="status"' in rendered.tail_html


def test_the_placeholder_shows_while_the_opener_is_being_typed() -> None:
    assert render_text(":::comp", complete=False).tail_html == ""
    assert render_text(":::component{ty", complete=False).tail_html == render_placeholder(None)
    assert render_text(':::component{type="task_card"}', complete=False).tail_html == render_placeholder("task_card")
    mid_paragraph = render_text('Intro <b>\n:::component{type="task_card"', complete=False)
    assert mid_paragraph.tail_html == "Intro &lt;b&gt;" + render_placeholder("task_card")


def test_an_opener_in_an_open_code_fence_is_not_a_placeholder() -> None:
    assert render_text('```\n:::component{type="task_table"}\n[', complete=False).tail_html == ""


def test_a_closed_block_becomes_final_once_its_closing_line_ends() -> None:
    source = f"Intro.\n\n{TABLE}"

    at_closer = render_text(source, complete=False)
    after_closer = render_text(source + "\n", complete=False)

    assert at_closer.committed == 1
    assert at_closer.tail_html == render_placeholder("task_table")
    assert after_closer.committed == 2
    assert after_closer.blocks[1] == render(TABLE)
    assert after_closer.tail == after_closer.tail_html == ""


MARKDOWN = (
    "Intro paragraph with *emphasis*.\n\n- one\n- two\n\n  still two\n- three\n\n"
    "```python\nprint('a')\n\n\nprint('b')\n```\n\n1. first\n2. second\n\n> quoted\n> more\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\nThe end."
)


@pytest.mark.parametrize("name", [*sorted(STREAMED), "markdown"])
def test_the_worker_splits_only_new_text_and_renders_what_a_whole_split_does(name: str) -> None:
    """chat.presenters.StepText starts each split where the finished blocks end: streamed in
    random pieces, it sends the same blocks and tail as splitting the whole text every time."""
    from chat.presenters import StepText

    text = {**STREAMED, "markdown": MARKDOWN}[name]
    rng = random.Random(name)
    step, page = StepText(1, 0), LivePage()
    at = 0
    while at < len(text):
        at = min(len(text), at + rng.randint(1, 9))
        step.fragments(text[:at], complete=False)
        page.update(text[:at], complete=False)
        assert step.blocks == page.blocks, f"at {at}"
        assert step._open.html == page.tail, f"at {at}"
    step.fragments(text, complete=True)
    page.update(text, complete=True)
    assert step.html == "".join(page.blocks) == full(text)
