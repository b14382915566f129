from __future__ import annotations

from chat.components import render

from ..helpers import TABLE, block


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
