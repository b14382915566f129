"""Replaying a stored conversation (agent/transcript.py) in a shape every provider takes."""

from __future__ import annotations

from typing import Any

from agent.transcript import NO_RESULT, CallIds, canonical


def test_stored_conversation_is_replayed_in_a_shape_every_provider_takes() -> None:
    call = {"type": "function", "function": {"name": "ping", "arguments": '{"broken'}}
    stored: list[dict[str, Any]] = [
        {"role": "user", "content": "one"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**call, "id": "d"}, {**call, "id": "d"}, {**call, "id": "gone"}],
        },
        {"role": "tool", "tool_call_id": "d", "content": "first"},
        {"role": "assistant", "content": "Stopped text of the next step"},  # a dead worker's order
        {"role": "tool", "tool_call_id": "d", "content": "second"},
        {"role": "tool", "tool_call_id": "nobody", "content": "orphan"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "two"},
    ]
    replay = canonical(stored)
    assert [m["role"] for m in replay] == ["user", "assistant", "tool", "tool", "tool", "assistant", "user"]
    calls = replay[1]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}", "{}"]
    assert calls[0]["id"] == "d" and len({c["id"] for c in calls}) == 3
    assert [(m["tool_call_id"], m["content"]) for m in replay[2:5]] == [
        (calls[0]["id"], "first"),
        (calls[1]["id"], "second"),
        (calls[2]["id"], NO_RESULT),
    ]


def test_a_provider_id_is_kept_unless_empty_or_taken_after_anthropics_rewrite() -> None:
    ids = CallIds(["a.b"])
    assert ids.assign("fresh") == "fresh"
    assert ids.assign("a_b") not in ("a_b", "a.b")  # "a.b" reaches Anthropic as "a_b"
    assert ids.assign("fresh") != "fresh"
    assert ids.assign("").startswith("call_")
