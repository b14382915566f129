"""One-line card texts: the default summariser, every built-in tool's summary and status text,
friendly names and the Connect action."""

from __future__ import annotations

from typing import Any

import pytest

from chat import presenters, summaries
from toolsets.registry import all_toolsets, resolve

TASKS = {
    "tasks": [
        {"id": 1, "name": "Fix login", "project": "Website relaunch", "status": "TODO"},
        {"id": 2, "name": "Ship beta", "project": "Mobile app 2.0", "status": "BLOCKED"},
        {"id": 3, "name": "Write copy", "project": "Q3 marketing", "status": "IN_PROGRESS"},
    ],
    "count": 3,
    "projects": ["Website relaunch", "Mobile app 2.0", "Q3 marketing"],
}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (None, "No result"),
        ("", "Empty result"),
        ("plain text answer", "plain text answer"),
        ("x" * 200, "x" * 89 + "…"),
        (42, "42"),
        ([1, 2, 3], "3 items"),
        ([], "No items"),
        (TASKS, "3 tasks from 3 projects"),
        ({"tasks": [{"name": "a"}]}, "1 task"),
        ({"results": []}, "No results"),
        ({"title": "A page", "url": "https://example.com"}, "A page"),
        ({"expression": "1+1", "result": 2}, "2"),
        ({"ok": True, "code": 7}, "ok: True, code: 7"),
    ],
)
def test_default_summary(result: Any, expected: str) -> None:
    assert summaries.default_summary(result) == expected


def tool(name: str) -> Any:
    found = resolve(name)
    assert found is not None
    return found[1]


@pytest.mark.parametrize(
    ("name", "result", "expected"),
    [
        (
            "toolset__clock_math__current_time",
            {"timezone": "Asia/Tokyo", "display": "23:52", "abbreviation": "JST"},
            "23:52 JST in Asia/Tokyo",
        ),
        ("toolset__clock_math__calculate", {"expression": "12*7", "result": 84}, "12*7 = 84"),
        (
            "toolset__exa__search",
            {"query": "AI news", "results": [{"title": "a", "url": "https://a"}] * 5},
            "5 results for “AI news”",
        ),
        (
            "toolset__exa__answer",
            {"answer": "42", "citations": [{"title": "t", "url": "https://u"}] * 3},
            "Answer with 3 citations",
        ),
        (
            "toolset__web__fetch_page",
            {"url": "https://example.com", "title": "Example", "text": "x" * 2048, "truncated": False},
            "“Example”",
        ),
        ("toolset__workspace__list_tasks", TASKS, "3 tasks from 3 projects"),
    ],
)
def test_built_in_tool_summaries(name: str, result: Any, expected: str) -> None:
    assert summaries.summarize(tool(name), result).startswith(expected)


def test_every_built_in_tool_has_display_name_summary_and_status_text() -> None:
    for toolset in all_toolsets().values():
        for t in toolset.tools:
            assert t.display_name and t.summarize is not None and t.status_text is not None, t.name


def test_status_text_comes_from_the_arguments() -> None:
    text = summaries.status_text(tool("toolset__exa__search"), "Exa: Search", '{"query": "django channels"}')
    assert text == "Searching the web for “django channels”…"
    assert summaries.status_text(None, "Thing: Do", {"target": "x"}) == "Thing: Do: x…"
    assert summaries.status_text(None, "Thing: Do", None) == "Thing: Do…"


def test_a_broken_summarizer_falls_back_to_the_default() -> None:
    assert summaries.summarize(tool("toolset__clock_math__calculate"), ["unexpected"]) == "1 item"


def test_errors_summarize_their_first_line() -> None:
    assert summaries.summarize_error("Rate limit reached\nretry later") == "Rate limit reached"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("toolset__exa__search", "Exa: Search"),
        ("toolset__workspace__list_tasks", "Workspace: List tasks"),
        ("toolset__web__fetch_page", "Web: Fetch page"),
        ("toolset__crm__GET_OPEN_DEALS", "Crm: Get open deals"),
        ("toolset__exa__brand_new_tool", "Exa: Brand new tool"),
        ("SOME_TOOL_NAME", "Some tool name"),
    ],
)
def test_friendly_names(name: str, expected: str) -> None:
    assert presenters.tool_display_name(name) == expected


def test_card_states() -> None:
    calling = presenters.card(1, 0, 0, name="toolset__exa__search", arguments='{"query": "q"}', status="calling")
    assert calling["status_label"] == "Calling..." and calling["summary"] == "Searching the web for “q”…"
    done = presenters.card(
        1,
        0,
        0,
        name="toolset__clock_math__calculate",
        status="success",
        result={"expression": "1+1", "result": 2},
        duration_ms=3,
    )
    assert done["status_label"] == "Completed" and done["summary"] == "1+1 = 2"
    failed = presenters.card(1, 0, 0, name="toolset__exa__search", status="error", error="Boom\nmore")
    assert failed["status_label"] == "Error" and failed["summary"] == "Boom"


def test_connect_action_for_unconfigured_toolset_only() -> None:
    card = presenters.card(
        1,
        0,
        0,
        name="toolset__exa__search",
        status="error",
        error="Exa web search: API key not configured.",
        error_type="permission_denied",
    )
    assert card["connect_label"] == "Connect Exa" and card["connect_url"] == "/toolsets/#toolset-exa"
    blocked = presenters.card(
        1,
        0,
        0,
        name="toolset__exa__search",
        status="error",
        error="Exa web search: Disabled by administrator.",
        error_type="permission_denied",
    )
    assert blocked["connect_url"] == ""
    other = presenters.card(1, 0, 0, name="toolset__exa__search", status="error", error="x", error_type="timeout_error")
    assert other["connect_url"] == ""


@pytest.mark.parametrize(
    "error",
    [
        "The user denied this call; it did not run.",
        "The user denied this call; it did not run. Their reason: API key not configured",
        "Nobody approved this call within 10 minutes, so it was treated as denied and did not run.",
        "Exa: Search is not allowed (its policy is Deny).",
        "Exa: Search is not among the tools selected for this chat, so it was not run.",
    ],
)
def test_a_denied_call_says_denied_with_no_connect_action(error: str) -> None:
    card = presenters.card(
        1, 0, 0, name="toolset__exa__search", status="error", error=error, error_type="permission_denied"
    )
    assert card["connect_url"] == "" and card["connect_label"] == ""
    assert card["error"] == error


def test_long_results_are_capped_with_a_link_to_all(db: Any) -> None:
    card = presenters.card(
        1, 0, 0, name="toolset__web__fetch_page", status="success", result={"text": "y" * 30_000}, execution_id=77
    )
    assert card["result_truncated"] and len(card["result"]) == presenters.RESULT_DISPLAY_LIMIT
    assert card["full_result_url"] == "/toolsets/executions/77/"
