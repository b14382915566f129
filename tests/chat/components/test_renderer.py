"""Cards, notices and the HTML allow-list (chat/components/renderer.py)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from django.utils.html import escape

from chat.components import COMPONENTS, keep_attribute, render, render_placeholder

from .helpers import TABLE, Elements, block, full, notice


def test_a_complete_block_renders_as_one_wrapped_card() -> None:
    html = full(TABLE)

    assert html.startswith('<div class="gen-ui gen-ui-task_table" data-component="task_table">')
    assert html.count('class="gen-ui ') == 1
    assert "Fix login bug" in html
    assert "could not be shown" not in html


def test_several_blocks_with_text_around_render_in_order() -> None:
    text = "\n\n".join(
        [
            "Your **tasks**:",
            TABLE,
            "And the meeting:",
            block("meeting_summary", {"summary": "We shipped.", "actionItems": [{"text": "Celebrate"}]}),
            "Done.",
        ]
    )

    html = full(text)

    order = [
        html.index(s)
        for s in (
            "<strong>tasks</strong>",
            "gen-ui-task_table",
            "And the meeting",
            "gen-ui-meeting_summary",
            "<p>Done.</p>",
        )
    ]
    assert order == sorted(order)


def test_invalid_json_shows_the_escaped_text_and_a_notice() -> None:
    html = notice(render(':::component{type="task_table"}\n[{"name": "<b>x</b>",}]\n:::'))

    assert "This card could not be shown: the data is not valid JSON" in html
    assert "<pre" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>" not in html


def test_an_unknown_type_shows_the_text() -> None:
    html = notice(render(':::component{type="pie_chart"}\n{"slices": [1, 2]}\n:::'))

    assert "unknown component type “pie_chart”" in html
    assert 'data-component="pie_chart"' in html
    assert '<pre class="gu-raw"><code>{"slices": [1, 2]}</code></pre>' in html


def test_a_bad_block_does_not_stop_the_rest_of_the_message() -> None:
    text = f"Intro.\n\n{block('task_table', [{'name': 1}])}\n\n{TABLE}\n\nOutro."

    html = full(text)

    assert "<p>Intro.</p>" in html
    assert "gen-ui-invalid" in html
    assert "gen-ui-task_table" in html
    assert "<p>Outro.</p>" in html


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_rendering_is_deterministic(name: str) -> None:
    source = block(name, COMPONENTS[name].example)

    assert render(source) == render(source)


def test_a_card_that_fails_to_render_costs_only_that_card(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: Any) -> dict[str, Any]:
        raise RuntimeError("bug")

    monkeypatch.setitem(COMPONENTS, "task_table", dataclasses.replace(COMPONENTS["task_table"], prepare=broken))

    html = full(f"Before.\n\n{TABLE}\n\nAfter.")

    assert "<p>Before.</p>" in html and "<p>After.</p>" in html
    assert "This card could not be shown: it failed to render." in html


def test_component_html_keeps_only_its_own_classes() -> None:
    assert keep_attribute("div", "class", "gu-card gen-ui-task_table is-done sr-only") == (
        "gu-card gen-ui-task_table is-done sr-only"
    )
    assert keep_attribute("span", "class", "stop-btn gu-status turn-state") == "gu-status"
    assert keep_attribute("span", "class", "tsp-trigger") is None


# --- Hostile data -------------------------------------------------------------------------------

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(1)>\'quoted\' & "double"'
HOSTILE_URLS = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:x",
    "//evil.example/x",
    "https:///nohost",
]


def hostile(schema: dict[str, Any], url: str = HOSTILE_URLS[0]) -> Any:
    """Data of the schema's shape with a hostile string in every free-text field."""
    if schema.get("type") == "array":
        return [hostile(schema["items"], url)]
    if schema.get("type") == "object":
        return {key: hostile(field, url) for key, field in schema["properties"].items()}
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("type") == "boolean":
        return True
    return url if schema.get("format") == "uri" else HOSTILE[: schema.get("maxLength")]


def assert_inert(html: str) -> None:
    assert "<script" not in html
    assert "<img" not in html
    assert "javascript:" not in html.lower()
    for tag, attrs in Elements(html).tags:
        assert tag not in ("script", "img", "iframe", "style")
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith(("http://", "https://")), href


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_hostile_strings_are_shown_as_text_and_never_run(name: str) -> None:
    html = render(block(name, hostile(COMPONENTS[name].schema)))

    assert "could not be shown" not in html
    assert_inert(html)
    assert escape("<script>alert(1)</script>") in html
    assert "&gt;&lt;img src=x onerror=alert(1)&gt;" in html  # visible as text, inert


@pytest.mark.parametrize("name", [n for n in sorted(COMPONENTS) if "url" in json.dumps(COMPONENTS[n].schema)])
@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_links_other_than_http_are_dropped(name: str, url: str) -> None:
    html = render(block(name, hostile(COMPONENTS[name].schema, url)))

    assert "could not be shown" not in html
    assert_inert(html)
    assert "href=" not in html


def test_a_quote_in_a_link_cannot_break_out_of_the_attribute() -> None:
    task = {"name": "x", "url": 'https://example.com/?q="><script>alert(1)</script>'}

    html = render(block("task_card", task))

    assert_inert(html)
    links = [attrs["href"] for tag, attrs in Elements(html).tags if tag == "a"]
    assert links == ['https://example.com/?q="><script>alert(1)</script>']


def test_hostile_text_in_an_invalid_block_is_escaped() -> None:
    html = render(f':::component{{type="<img src=x onerror=alert(1)>"}}\n{HOSTILE}\n:::')

    assert_inert(html)
    assert "could not be shown" in html


def test_the_opener_type_cannot_inject_into_the_placeholder() -> None:
    assert render_placeholder('"><script>') == render_placeholder(None)
