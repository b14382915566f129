"""Strict JSON for untrusted frames and bodies: caps, depth, finite numbers, valid Unicode."""

from __future__ import annotations

import pytest

from core.strictjson import InvalidJSON, loads


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"a":' * 50_000,
        '{"turn": 1e400}',
        '{"turn": -1e400}',
        '{"turn": Infinity}',
        '{"turn": NaN}',
        "1" * 5000,  # past Python's integer-string limit
        '"\\ud800"',  # a lone surrogate
        "{",
        "",
        b"\xff\xfe",
    ],
)
def test_hostile_json_is_refused_with_a_reason(text: str | bytes) -> None:
    with pytest.raises(InvalidJSON) as info:
        loads(text, max_bytes=1_000_000)
    assert str(info.value)


def test_size_cap() -> None:
    with pytest.raises(InvalidJSON, match="too large"):
        loads('"' + "x" * 100 + '"', max_bytes=50)


def test_depth_counts_only_structure_outside_strings() -> None:
    assert loads('{"a": "[[[[[[[[[[\\"]]]"}', max_bytes=1000, max_depth=1) == {"a": '[[[[[[[[[["]]]'}
    assert loads("[[1]]", max_bytes=100, max_depth=2) == [[1]]
    with pytest.raises(InvalidJSON, match="nested"):
        loads("[[[1]]]", max_bytes=100, max_depth=2)


def test_ordinary_json_is_unchanged() -> None:
    value = {"type": "sync", "turn": 12, "f": 1.5, "s": '😀 \\ "', "l": [True, None]}
    import json

    assert loads(json.dumps(value), max_bytes=10_000) == value
    assert loads(json.dumps(value).encode(), max_bytes=10_000) == value
