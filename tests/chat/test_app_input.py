"""A call's arguments read while the model writes them (chat/app_input.py), for an MCP App's
View (`tool-input-partial`): whatever is whole is kept, a string as far as it goes."""

from __future__ import annotations

from chat.app_input import partial_arguments


def test_incomplete_arguments_are_read_as_far_as_they_go() -> None:
    assert partial_arguments("{") == {}
    assert partial_arguments('{"city') == {}
    assert partial_arguments('{"city":') == {}
    assert partial_arguments('{"city": "Par') == {"city": "Par"}
    assert partial_arguments('{"city": "Paris", "days": [1, 2') == {"city": "Paris", "days": [1, 2]}
    assert partial_arguments('{"a": {"b": "c"}, "d": tr') == {"a": {"b": "c"}}
    assert partial_arguments('{"a": "x\\') == {"a": "x"}
    assert partial_arguments('{"a": 1}') == {"a": 1}


def test_what_is_not_an_object_is_not_shown() -> None:
    assert partial_arguments("") is None
    assert partial_arguments("[1, 2") is None
    assert partial_arguments('{"a": "' + "x" * 200_000) is None  # too long to read again and again
