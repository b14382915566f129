"""The block syntax (chat/components/syntax.py), and how the Markdown renderer splits on it."""

from __future__ import annotations

import pytest

from chat import components
from chat.rendering import split_blocks

from .helpers import TABLE, full


def test_a_component_block_is_one_block_even_with_blank_lines_inside() -> None:
    source = ':::component{type="task_table"}\n[\n\n  {"name": "a"}\n\n]\n:::'
    text = f"Before.\n\n{source}\n\nAfter."

    spans = split_blocks(text)

    assert [text[s.start : s.end] for s in spans] == ["Before.", source, "After."]
    assert [s.component for s in spans] == [False, True, False]


def test_a_component_block_needs_no_blank_lines_around_it() -> None:
    text = f"Here are your tasks:\n{TABLE}\nAnything else?"

    spans = split_blocks(text)

    assert [text[s.start : s.end] for s in spans] == ["Here are your tasks:", TABLE, "Anything else?"]


@pytest.mark.parametrize(
    "text",
    [
        "a ::: b",
        ":::note\nThis is an admonition.\n:::",
        ":::component\n[1]\n:::",
        ':::component{type="task_table"} and more words\n[]\n:::',
        ':::components{type="task_table"}\n[]\n:::',
        '    :::component{type="task_table"}\n    []\n    :::',
        '> :::component{type="task_table"}\n> []\n> :::',
    ],
)
def test_text_with_colons_that_is_not_a_component_block_stays_markdown(text: str) -> None:
    html = full(text)

    assert "gen-ui" not in html
    assert ":::" in html


def test_a_component_block_inside_a_code_fence_is_code() -> None:
    html = full(f"```\n{TABLE}\n```")

    assert "gen-ui" not in html
    assert '<pre><span></span><code>:::component{type="task_table"}' in html


def test_ruby_style_symbols_and_a_lone_closer_stay_text() -> None:
    html = full("Use `:::` to open.\n\n:::\n\nThat was a lone closer.")

    assert "gen-ui" not in html
    assert "<p>:::</p>" in html


def test_opener_attributes_may_use_single_quotes_or_none() -> None:
    assert components.opener_type(":::component{type='task_card'}") == "task_card"
    assert components.opener_type(":::component{type=task_card}") == "task_card"
    assert components.opener_type(':::component{ type = "task_card" }') == "task_card"
    assert components.opener_type(":::component{}") == ""
    assert components.opener_type(':::component{type="task_card"} extra') is None
