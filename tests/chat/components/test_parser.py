"""Validation and its notices (chat/components/parser.py)."""

from __future__ import annotations

import json

from chat.components import parse, render

from .helpers import TASKS, block, full, notice


def test_data_of_the_wrong_shape_names_the_field() -> None:
    html = notice(render(block("task_table", [{"name": "ok"}, {"name": "bad", "status": "WIP"}])))

    assert "item 2 › status: should be one of TODO, IN_PROGRESS" in html
    assert "WIP" in html


def test_a_missing_required_field_is_named() -> None:
    assert parse(block("task_table", [{"status": "TODO"}])).error == "item 1: “name” is a required property"


def test_the_wrong_top_level_type_is_explained() -> None:
    assert parse(block("task_table", {"name": "x"})).error == "should be an array, not an object"


def test_a_block_without_a_type_or_data_has_a_notice() -> None:
    assert parse(":::component{}\n[]\n:::").error == "the block names no component type"
    assert parse(':::component{type="task_table"}\n\n:::').error == "the block is empty"


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


def test_deeply_nested_json_is_a_notice_not_a_crash() -> None:
    html = render(f':::component{{type="task_table"}}\n{"[" * 100_000}{"]" * 100_000}\n:::')

    assert "could not be shown" in html
