"""Code blocks: highlighted once by Pygments, with classes of their own and a copy button that
only the page can add."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from chat import highlight
from chat.presenters import card
from chat.rendering import render_complete


def test_a_fenced_block_with_a_language_is_highlighted_with_prefixed_classes() -> None:
    html = render_complete('```python\ndef f():\n    return "<b>"  # note\n```')

    assert '<span class="hl-k">def</span>' in html
    assert '<span class="hl-c1"># note</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html
    assert html.count('data-copy-code="" aria-label="Copy code"') == 1


def test_model_output_cannot_borrow_the_pages_classes_ids_or_data_attributes() -> None:
    html = render_complete(
        '<div class="hl code-block stop-btn" id="stop-btn" data-copy-url="/x">a</div>'
        '<span class="hl-k send-btn" data-edit="x">k</span> <code class="language-py act-btn hl-k">z</code>'
        "<button data-copy-code>fake</button>"
    )

    assert "stop-btn" not in html and "send-btn" not in html and "act-btn" not in html
    assert "data-edit" not in html and "data-copy-url" not in html and "id=" not in html
    assert "code-block" not in html and "<button" not in html
    assert '<span class="hl-k">k</span>' in html and '<code class="language-py">z</code>' in html


def test_the_stored_stylesheet_is_the_one_pygments_makes() -> None:
    stored = (Path(settings.BASE_DIR) / "static" / "css" / "highlight.css").read_text()

    assert stored == highlight.stylesheet(), "run: python -m chat.highlight > static/css/highlight.css"


def test_a_card_starting_its_call_has_no_empty_body() -> None:
    starting = card(1, 0, 0, name="clock_math__calculate", status="pending")
    no_arguments = card(1, 0, 0, name="clock_math__calculate", status="calling", arguments="{}")
    with_arguments = card(1, 0, 0, name="clock_math__calculate", status="calling", arguments='{"expression": "1+1"}')

    assert starting["has_body"] is False and no_arguments["has_body"] is False
    assert with_arguments["has_body"] is True and '"expression": "1+1"' in with_arguments["arguments"]
