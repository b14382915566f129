"""A server's JSON Schema checked with its patterns bounded (core/bounded_schema.py): the same
verdicts as jsonschema's for ordinary patterns, and a prompt error, never a stall, for a
pattern Python's `re` would backtrack through for minutes."""

from __future__ import annotations

import time
from typing import Any

import jsonschema
import pytest

from core import bounded_schema
from toolsets import arguments
from toolsets.base import Tool

HOSTILE = "^(a|a)*$"  # `re`: 2^n steps for n a's and a mismatch at the end
SLOW_TEXT = "a" * 40 + "!"
CLOSED = {"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False}


def verdicts(schema: dict[str, Any], instance: Any) -> list[str]:
    return sorted(e.validator for e in bounded_schema.errors(schema, instance))  # type: ignore[misc]


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "string", "pattern": "^[a-z]+$"}, "abc"),
        ({"type": "string", "pattern": "^[a-z]+$"}, "ab1"),
        ({"type": "string", "pattern": "b"}, "abc"),  # unanchored, as JSON Schema says
        ({"patternProperties": {"^x-": {"type": "integer"}}}, {"x-a": 1, "y": "s"}),
        ({"patternProperties": {"^x-": {"type": "integer"}}}, {"x-a": "no"}),
        (
            {"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False},
            {"a": 1, "x-b": 2},
        ),
        ({"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False}, {"zz": 1}),
        ({"properties": {"a": {}}, "additionalProperties": {"type": "string"}}, {"a": 1, "b": 2}),
        ({"properties": {"a": {}}, "unevaluatedProperties": False}, {"a": 1, "b": 2}),
    ],
)
def test_ordinary_schemas_get_jsonschemas_verdict(schema: dict[str, Any], instance: Any) -> None:
    expected = sorted(e.validator for e in jsonschema.Draft202012Validator(schema).iter_errors(instance))
    assert verdicts(schema, instance) == expected


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "string", "pattern": HOSTILE}, SLOW_TEXT),
        ({"type": "object", "patternProperties": {HOSTILE: {}}}, {SLOW_TEXT: 1}),
        ({"type": "object", "patternProperties": {HOSTILE: {}}, "additionalProperties": False}, {SLOW_TEXT: 1}),
        # Many slow patterns share one budget: the whole check stays bounded.
        ({"type": "array", "items": {"type": "string", "pattern": HOSTILE}}, [SLOW_TEXT] * 50),
    ],
)
def test_a_hostile_pattern_is_an_error_within_the_budget(schema: dict[str, Any], instance: Any) -> None:
    started = time.monotonic()
    found = bounded_schema.errors(schema, instance)
    assert time.monotonic() - started < 1.5
    assert any(isinstance(e, bounded_schema.Unchecked) for e in found)


def test_patterns_too_costly_to_compile_are_refused_unrun() -> None:
    assert bounded_schema.pattern_problem("((a{100}){100}){100}") == "a pattern repeats too many times"
    assert bounded_schema.pattern_problem("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$") == ""
    assert bounded_schema.pattern_problem(r"^[a-z]{1,64}@[a-z.]{1,255}$") == ""
    started = time.monotonic()
    (error,) = bounded_schema.errors({"pattern": "((a{100}){100}){100}"}, "a")
    assert isinstance(error, bounded_schema.Unchecked) and time.monotonic() - started < 0.5
    assert bounded_schema.schema_problems({"properties": {"x": {"anyOf": [{"pattern": "(a{999}){999}"}]}}})
    assert bounded_schema.schema_problems({"patternProperties": {"^a": {}}, "unevaluatedProperties": False})
    assert bounded_schema.schema_problems({"properties": {"pattern": {"type": "string"}}}) == ""


def test_a_tools_arguments_are_checked_promptly_against_a_servers_pattern() -> None:
    # A model (perhaps steered by a tool result) sends the argument; the schema is the server's.
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": HOSTILE}}}
    tool = Tool(func=lambda name: name, name="t", display_name="T", description="", parameters=schema)
    started = time.monotonic()
    (error,) = arguments.validation_errors(tool, {"name": SLOW_TEXT})
    assert time.monotonic() - started < 1.5
    assert error.startswith("name: This value could not be checked against the server's pattern")
    assert arguments.validation_errors(tool, {"name": "aaa"}) == []


@pytest.mark.parametrize(
    ("schema", "instance"), [(CLOSED, {"zz": 1, "yy": 2}), ({"additionalProperties": False}, {"b": 1})]
)
def test_messages_are_jsonschemas_own(schema: dict[str, Any], instance: Any) -> None:
    expected = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(instance)]
    assert [e.message for e in bounded_schema.errors(schema, instance)] == expected
