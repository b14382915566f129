"""Joining streamed tool-call deltas (agent/accumulator.py), whatever shape each provider
streams them in."""

from __future__ import annotations

import json

from litellm.types.utils import ChatCompletionDeltaToolCall, Function

from agent.accumulator import ToolCallAccumulator


def test_new_id_at_used_index_opens_new_call() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "one", "function": {"name": "a", "arguments": '{"q": 1}'}}])
    acc.add([{"index": 0, "id": "two", "function": {"name": "b", "arguments": '{"q": 2}'}}])
    calls = acc.calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [("one", "a", '{"q": 1}'), ("two", "b", '{"q": 2}')]


def test_empty_arguments_mean_empty_object() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "z", "function": {"name": "noargs", "arguments": ""}}])
    assert acc.calls()[0].arguments == "{}"


def test_argument_fragments_are_joined_by_index() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}])
    acc.add([{"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}}])
    acc.add([{"index": 0, "function": {"arguments": '{"x": '}}])
    acc.add([{"index": 1, "function": {"arguments": ": 2}"}}, {"index": 0, "function": {"arguments": "1}"}}])
    assert [json.loads(c.arguments) for c in acc.calls()] == [{"x": 1}, {"y": 2}]


def test_whole_calls_without_index_each_get_a_slot() -> None:
    acc = ToolCallAccumulator()
    acc.add(
        [
            {"id": "g1", "function": {"name": "a", "arguments": '{"n": 1}'}},
            {"id": "g2", "function": {"name": "a", "arguments": '{"n": 2}'}},
        ]
    )
    assert [c.id for c in acc.calls()] == ["g1", "g2"]


def test_call_ids_are_sent_back_exactly() -> None:
    odd = "call_abc==/thought+signature"
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": odd, "function": {"name": "a", "arguments": "{}"}}])
    assert acc.calls()[0].to_openai()["id"] == odd


def test_litellm_delta_objects_are_understood() -> None:
    acc = ToolCallAccumulator()
    acc.add([ChatCompletionDeltaToolCall(index=0, id="x", function=Function(name="f", arguments='{"a"'))])
    acc.add([ChatCompletionDeltaToolCall(index=0, function=Function(arguments=": 1}"))])
    assert json.loads(acc.calls()[0].arguments) == {"a": 1}


def test_same_id_at_index_zero_with_another_name_is_another_call() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "call_0", "function": {"name": "a", "arguments": '{"q": 1}'}}])
    acc.add([{"index": 0, "id": "call_0", "function": {"name": "b", "arguments": '{"q": 2}'}}])
    acc.add([{"index": 0, "id": "call_0", "function": {"name": "b", "arguments": '{"q": 3}'}}])
    assert [(c.name, c.arguments) for c in acc.calls()] == [("a", '{"q": 1}'), ("b", '{"q": 2}'), ("b", '{"q": 3}')]


def test_a_name_repeated_on_every_fragment_is_one_call() -> None:
    acc = ToolCallAccumulator()
    for piece in ['{"q"', ": ", "1}"]:
        acc.add([{"index": 0, "id": "c", "function": {"name": "a", "arguments": piece}}])
    assert [(c.name, c.arguments) for c in acc.calls()] == [("a", '{"q": 1}')]


def test_two_calls_in_one_chunk_and_fragments_without_index() -> None:
    acc = ToolCallAccumulator()
    acc.add(
        [
            {"index": 0, "id": "x", "function": {"name": "a", "arguments": '{"n": 1}'}},
            {"index": 1, "id": "y", "function": {"name": "b", "arguments": '{"n": 2}'}},
        ]
    )
    acc.add([{"id": "z", "function": {"name": "c", "arguments": '{"n"'}}])
    acc.add([{"function": {"arguments": ": 3}"}}])
    assert [(c.id, c.arguments) for c in acc.calls()] == [("x", '{"n": 1}'), ("y", '{"n": 2}'), ("z", '{"n": 3}')]


def test_missing_arguments_key_means_no_arguments() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "k", "function": {"name": "noargs"}}])
    assert acc.calls()[0].arguments == "{}"
    ids = {acc.calls()[0].id for _ in range(3)}
    assert ids == {"k"}


def test_the_arguments_so_far_of_each_named_call_are_known_while_they_stream() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}])
    assert acc.grown == set()
    acc.add([{"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}}])
    acc.add([{"index": 0, "function": {"arguments": '{"x": "hel'}}])
    assert acc.grown == {0}
    assert (acc.arguments_so_far(0), acc.arguments_so_far(1)) == ('{"x": "hel', '{"y"')
    assert acc.arguments_so_far(7) == ""
