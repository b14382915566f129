from __future__ import annotations

import dataclasses
import json
import random
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

import pytest
from django.utils.html import escape

from chat import components
from chat.components import COMPONENTS, parse, render, render_placeholder
from chat.prompts import system_prompt
from chat.rendering import render_text, split_blocks, tail_patch


def block(kind: str, data: Any, *, indent: int | None = None) -> str:
    return f':::component{{type="{kind}"}}\n{json.dumps(data, indent=indent, ensure_ascii=False)}\n:::'


def full(text: str) -> str:
    return "".join(render_text(text, complete=True).blocks)


TASKS = [
    {"name": "Fix login bug", "status": "IN_PROGRESS", "priority": "HIGH", "dueDate": "2026-02-15", "assignee": "John"},
    {"name": "Write release notes", "status": "TODO", "priority": "MEDIUM", "dueDate": "2026-02-18", "assignee": "Ana"},
    {"name": "Migrate billing", "status": "BLOCKED", "priority": "URGENT"},
    {"name": "Update onboarding emails", "status": "DONE", "priority": "LOW", "assignee": "Sam"},
]
TABLE = block("task_table", TASKS, indent=2)


class Elements(HTMLParser):
    """Every start tag with its attributes, to check what the browser would build."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


# --- The block syntax ---------------------------------------------------------------------------


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
    assert html.startswith('<pre><code>:::component{type="task_table"}')


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


# --- Blocks that cannot be shown ----------------------------------------------------------------


def _notice(html: str) -> str:
    assert html.startswith('<div class="gen-ui gen-ui-invalid"'), html
    return html


def test_invalid_json_shows_the_escaped_text_and_a_notice() -> None:
    html = _notice(render(':::component{type="task_table"}\n[{"name": "<b>x</b>",}]\n:::'))

    assert "This card could not be shown: the data is not valid JSON" in html
    assert "<pre" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>" not in html


def test_data_of_the_wrong_shape_names_the_field() -> None:
    html = _notice(render(block("task_table", [{"name": "ok"}, {"name": "bad", "status": "WIP"}])))

    assert "item 2 › status: should be one of TODO, IN_PROGRESS" in html
    assert "WIP" in html


def test_a_missing_required_field_is_named() -> None:
    assert parse(block("task_table", [{"status": "TODO"}])).error == "item 1: “name” is a required property"


def test_the_wrong_top_level_type_is_explained() -> None:
    assert parse(block("task_table", {"name": "x"})).error == "should be an array, not an object"


def test_an_unknown_type_shows_the_text() -> None:
    html = _notice(render(':::component{type="pie_chart"}\n{"slices": [1, 2]}\n:::'))

    assert "unknown component type “pie_chart”" in html
    assert 'data-component="pie_chart"' in html
    assert '<pre class="gu-raw"><code>{"slices": [1, 2]}</code></pre>' in html


def test_a_block_without_a_type_or_data_has_a_notice() -> None:
    assert parse(":::component{}\n[]\n:::").error == "the block names no component type"
    assert parse(':::component{type="task_table"}\n\n:::').error == "the block is empty"


def test_a_bad_block_does_not_stop_the_rest_of_the_message() -> None:
    text = f"Intro.\n\n{block('task_table', [{'name': 1}])}\n\n{TABLE}\n\nOutro."

    html = full(text)

    assert "<p>Intro.</p>" in html
    assert "gen-ui-invalid" in html
    assert "gen-ui-task_table" in html
    assert "<p>Outro.</p>" in html


def test_a_message_cut_off_inside_a_block_says_so() -> None:
    # A stopped or failed turn stores what streamed so far.
    html = full('Here:\n\n:::component{type="task_table"}\n[{"name": "Fix')

    assert "<p>Here:</p>" in html
    assert "the block was cut off before it was finished" in html


def test_a_forgotten_closer_at_the_end_still_renders_valid_data() -> None:
    html = full(f'Here:\n\n:::component{{type="task_table"}}\n{json.dumps(TASKS)}\n')

    assert "gen-ui-task_table" in html
    assert "could not be shown" not in html


def test_json_wrapped_in_a_code_fence_inside_the_block_is_accepted() -> None:
    html = render(f':::component{{type="task_table"}}\n```json\n{json.dumps(TASKS)}\n```\n:::')

    assert "gen-ui-task_table" in html


def test_enum_letter_case_is_forgiven() -> None:
    parsed = parse(block("task_table", [{"name": "a", "status": "In progress", "priority": "high"}]))

    assert parsed.error == ""
    assert parsed.data == [{"name": "a", "status": "IN_PROGRESS", "priority": "HIGH"}]


# --- Each component -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_every_example_is_valid_and_renders_its_card(name: str) -> None:
    component = COMPONENTS[name]

    assert parse(block(name, component.example)).error == ""
    html = render(block(name, component.example))
    assert html.startswith(f'<div class="gen-ui gen-ui-{name}" data-component="{name}">')
    assert html.endswith("</div>")


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_rendering_is_deterministic(name: str) -> None:
    source = block(name, COMPONENTS[name].example)

    assert render(source) == render(source)


def test_task_table_is_a_real_table_with_semantic_badges() -> None:
    html = render(TABLE)

    assert "<caption>" in html
    assert html.count('<th scope="col"') == 5
    assert '<th scope="row" role="rowheader" class="gu-task-name">Fix login bug</th>' in html
    for status in ("in_progress", "todo", "blocked", "done"):
        assert f"gu-status gu-status-{status}" in html
    for priority in ("high", "medium", "urgent", "low"):
        assert f"gu-priority gu-priority-{priority}" in html
    assert '<time datetime="2026-02-15">15 Feb 2026</time>' in html
    assert "4 tasks" in html
    assert "1 in progress" in html


def test_task_table_shows_missing_fields_as_none() -> None:
    html = render(block("task_table", [{"name": "Only a name"}]))

    assert html.count('<span class="sr-only">none</span>') == 4


def test_task_card_has_a_display_only_checklist_and_a_safe_link() -> None:
    html = render(block("task_card", COMPONENTS["task_card"].example))

    assert "1 of 2 done" in html
    assert '<span class="sr-only">Done: </span><span class="gu-check-text">Reproduce</span>' in html
    assert '<span class="sr-only">To do: </span><span class="gu-check-text">Patch the callback</span>' in html
    assert "<input" not in html  # nothing to click: the checklist is display-only
    assert 'href="https://tracker.example.com/WEB-142" target="_blank" rel="noopener noreferrer"' in html


def test_calendar_groups_events_by_day_with_times() -> None:
    events = [
        {
            "title": "Standup",
            "start": "2026-02-16T09:30",
            "end": "2026-02-16T09:45",
            "attendees": ["A", "B", "C", "D", "E"],
        },
        {"title": "Offsite", "start": "2026-02-17"},
        {"title": "Someday", "start": "next week"},
    ]

    html = render(block("calendar_events", events))

    assert '<time datetime="2026-02-16">Mon 16 Feb 2026</time>' in html
    assert '<time datetime="2026-02-16T09:30:00">09:30 – 09:45</time>' in html
    assert "A, B, C, D and 1 more" in html
    assert "All day" in html
    assert "Other" in html and "next week" in html


def test_email_summary_marks_unread_messages() -> None:
    emails = [
        {"from": "Ana", "subject": "Roadmap", "snippet": "Draft…", "date": "2026-02-14T09:12", "unread": True},
        {"from": "Stripe", "subject": "Invoice", "date": "2026-02-13"},
    ]

    html = render(block("email_summary", emails))

    assert html.count("gu-email is-unread") == 1
    assert "Unread, from </span>Ana" in html
    assert "1 unread" in html
    assert "14 Feb 2026, 09:12" in html


def test_meeting_summary_lists_action_items_as_a_checklist() -> None:
    html = render(block("meeting_summary", COMPONENTS["meeting_summary"].example))

    assert "Sprint planning" in html
    assert "0 of 1 done" in html
    assert '<span class="sr-only">To do: </span><span class="gu-check-body">' in html
    assert "Release on 27 February" in html


@pytest.mark.parametrize(("platform", "limit"), [("linkedin", 3000), ("x", 280), ("mastodon", 500), ("bluesky", 300)])
def test_social_post_counts_characters_against_the_platform_limit(platform: str, limit: int) -> None:
    post = {"platform": platform, "author": "Ana", "handle": "@ana", "text": "a" * (limit + 5)}

    html = render(block("social_post", post))

    assert f"{limit + 5} / {limit} characters" in html
    assert "5 over the" in html
    assert "is-over" in html
    assert "is-over" not in render(block("social_post", {**post, "text": "short"}))


def test_social_post_platform_names_are_case_insensitive() -> None:
    assert "gu-post-x" in render(block("social_post", {"platform": "X", "author": "a", "text": "b"}))


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


# --- Streaming ----------------------------------------------------------------------------------


class LivePage:
    """The page as the worker updates it (chat/streaming.py): finished blocks are appended once,
    the tail element changes as `tail_patch` says."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.tail = ""  # the tail element's content
        self.committed = 0
        self.sent = ("", "")  # the tail and tail_html last sent

    def update(self, text: str, *, complete: bool) -> None:
        rendered = render_text(text, complete=complete, already=self.committed)
        assert rendered.committed >= self.committed, f"committed went back at {text!r}"
        self.blocks.extend(rendered.blocks)
        patch = tail_patch(*self.sent, rendered, complete=complete)
        if patch is not None:
            self.tail = patch.html if patch.replace else self.tail + patch.html
        self.committed, self.sent = rendered.committed, (rendered.tail, rendered.tail_html)


def reloaded(text: str) -> tuple[str, str]:
    """What a page rendered from the live state shows (chat/presenters.py + _step.html)."""
    rendered = render_text(text, complete=False)
    return "".join(rendered.blocks), rendered.tail_html or escape(rendered.tail)


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


# --- The system prompt --------------------------------------------------------------------------


def test_the_system_prompt_documents_every_component_with_its_example() -> None:
    prompt = system_prompt(datetime(2026, 2, 14, tzinfo=UTC))

    assert "Saturday, 14 February 2026" in prompt
    assert "Do not announce or narrate tool calls" in prompt
    assert "Speak once you have the data" in prompt
    for name, component in COMPONENTS.items():
        assert f"### {name}\n{component.description}" in prompt
        assert f':::component{{type="{name}"}}\n{json.dumps(component.example, ensure_ascii=False)}\n:::' in prompt
        for field in component.schema.get("properties") or component.schema["items"]["properties"]:
            assert f'"{field}"' in prompt


def test_the_documented_enums_are_the_accepted_ones() -> None:
    prompt = components.prompt_documentation()

    assert 'one of "TODO", "IN_PROGRESS", "BLOCKED", "DONE", "CANCELLED"' in prompt
    assert 'one of "linkedin", "x", "mastodon", "bluesky"' in prompt


def test_deeply_nested_json_is_a_notice_not_a_crash() -> None:
    html = render(f':::component{{type="task_table"}}\n{"[" * 100_000}{"]" * 100_000}\n:::')

    assert "could not be shown" in html


def test_a_card_that_fails_to_render_costs_only_that_card(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(data: Any) -> dict[str, Any]:
        raise RuntimeError("bug")

    monkeypatch.setitem(COMPONENTS, "task_table", dataclasses.replace(COMPONENTS["task_table"], prepare=broken))

    html = full(f"Before.\n\n{TABLE}\n\nAfter.")

    assert "<p>Before.</p>" in html and "<p>After.</p>" in html
    assert "This card could not be shown: it failed to render." in html


def test_component_html_keeps_only_its_own_classes() -> None:
    from chat.components import _keep_attribute

    assert _keep_attribute("div", "class", "gu-card gen-ui-task_table is-done sr-only") == (
        "gu-card gen-ui-task_table is-done sr-only"
    )
    assert _keep_attribute("span", "class", "stop-btn gu-status turn-state") == "gu-status"
    assert _keep_attribute("span", "class", "tsp-trigger") is None
