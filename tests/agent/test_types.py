"""What a tool call becomes in a transcript sent to a provider (agent/types.py)."""

from __future__ import annotations

import json

import pytest

from agent.types import ToolCall, transcript_arguments


@pytest.mark.parametrize("raw", ["[1, 2]", "null", '"text"', "NaN", '{"x": Infinity}', "{", "1e999999"])
def test_transcript_arguments_are_always_a_json_object(raw: str) -> None:
    value = json.loads(transcript_arguments(raw), parse_constant=lambda name: pytest.fail(name))
    assert isinstance(value, dict)


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("functions.web search", "functions_web_search"),
        ("", "unknown_tool"),
        ("x" * 100, "x" * 64),
        ("ok_name-1", "ok_name-1"),
    ],
)
def test_tool_names_in_the_transcript_are_ones_every_provider_accepts(name: str, sent: str) -> None:
    assert ToolCall("c", name).to_openai()["function"]["name"] == sent
