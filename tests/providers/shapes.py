"""Recorded-style streams, one per shape real providers send, and what Tessera must make of each.

The chunks follow what each provider's OpenAI-compatible endpoint (or LiteLLM's translation of
its native stream) really emits; the names say which provider a shape comes from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .replay import Reply

CALC = "toolset__clock_math__calculate"
TIME = "toolset__clock_math__current_time"


def text(content: str | None, **extra: Any) -> dict[str, Any]:
    return {"delta": {"content": content, **extra}, "finish_reason": None}


def role() -> dict[str, Any]:
    return {"delta": {"role": "assistant", "content": ""}, "finish_reason": None}


def calls(*deltas: dict[str, Any], content: Any = "absent") -> dict[str, Any]:
    delta: dict[str, Any] = {"tool_calls": list(deltas)}
    if content != "absent":
        delta = {"role": "assistant", "content": content, **delta}
    return {"delta": delta, "finish_reason": None}


def call(index: int | None, id: str | None = None, name: str | None = None, args: Any = "absent") -> dict[str, Any]:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args != "absent":
        function["arguments"] = args
    delta: dict[str, Any] = {"function": function}
    if index is not None:
        delta["index"] = index
    if id is not None:
        delta["id"] = id
        delta["type"] = "function"
    return delta


def finish(reason: str) -> dict[str, Any]:
    return {"delta": {}, "finish_reason": reason}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def answer(words: str, reason: str = "stop") -> Reply:
    return Reply([role(), *(text(w) for w in _pieces(words)), finish(reason)])


def _pieces(words: str) -> list[str]:
    parts = words.split(" ")
    return [part if i == 0 else " " + part for i, part in enumerate(parts)]


def split(value: dict[str, Any], size: int = 4) -> list[str]:
    raw = json.dumps(value)
    return [raw[i : i + size] for i in range(0, len(raw), size)]


@dataclass
class Shape:
    name: str
    replies: list[Reply]
    # (tool, arguments as the tool received them: a dict, or the raw text when it is not JSON)
    executions: list[tuple[str, Any]] = field(default_factory=list)
    # What each execution ended as, in call order ("success" / "error:<type>").
    outcomes: list[str] = field(default_factory=list)
    final_text: str = ""
    status: str = "completed"
    requests: int = 0  # 0: one per reply
    notice: str = ""  # a piece of the notice the reader must see
    finish_reason: str = ""
    error: str = ""
    roles: list[str] = field(default_factory=list)  # the stored messages of the turn, in order
    max_iterations: int = 5


SIX_SEVEN = {"expression": "6*7"}
TOKYO = {"timezone": "Asia/Tokyo"}
TWO_CALLS_DONE = answer("It is 42, and Tokyo time is known.")

SHAPES = [
    Shape(
        "openai_parallel_calls_with_split_arguments",
        [
            Reply(
                [
                    role(),
                    calls(call(0, "call_A1", CALC, "")),
                    calls(call(1, "call_B2", TIME, "")),
                    *[
                        calls(call(0, args=a), call(1, args=b))
                        for a, b in zip(split(SIX_SEVEN), split(TOKYO), strict=False)
                    ],
                    *[calls(call(1, args=b)) for b in split(TOKYO)[len(split(SIX_SEVEN)) :]],
                    finish("tool_calls"),
                ]
            ),
            TWO_CALLS_DONE,
        ],
        executions=[(CALC, SIX_SEVEN), (TIME, TOKYO)],
        outcomes=["success", "success"],
        final_text="It is 42, and Tokyo time is known.",
        roles=["user", "assistant", "tool", "tool", "assistant"],
    ),
    Shape(
        "ollama_parallel_calls_all_at_index_0",
        [
            Reply(
                [
                    calls(call(0, "call_x1", CALC, json.dumps(SIX_SEVEN)), content=""),
                    calls(call(0, "call_x2", TIME, json.dumps(TOKYO))),
                    calls(call(0, "call_x3", CALC, json.dumps({"expression": "2+2"}))),
                    finish("tool_calls"),
                ]
            ),
            TWO_CALLS_DONE,
        ],
        executions=[(CALC, SIX_SEVEN), (TIME, TOKYO), (CALC, {"expression": "2+2"})],
        outcomes=["success", "success", "success"],
        final_text="It is 42, and Tokyo time is known.",
        roles=["user", "assistant", "tool", "tool", "tool", "assistant"],
    ),
    Shape(
        "ollama_index_0_with_one_id_for_every_call",
        [
            Reply(
                [
                    calls(call(0, "call_0", CALC, json.dumps(SIX_SEVEN))),
                    calls(call(0, "call_0", TIME, json.dumps(TOKYO))),
                    finish("stop"),  # and "stop" although it made calls
                ]
            ),
            TWO_CALLS_DONE,
        ],
        executions=[(CALC, SIX_SEVEN), (TIME, TOKYO)],
        outcomes=["success", "success"],
        final_text="It is 42, and Tokyo time is known.",
        roles=["user", "assistant", "tool", "tool", "assistant"],
    ),
    Shape(
        "gemini_whole_calls_in_one_delta",
        [
            Reply(
                [
                    calls(
                        call(0, "call_g1__thought__c2lnbmF0dXJl", CALC, json.dumps(SIX_SEVEN)),
                        call(1, "call_g2", TIME, json.dumps(TOKYO)),
                        content=None,
                    ),
                    finish("tool_calls"),
                ]
            ),
            TWO_CALLS_DONE,
        ],
        executions=[(CALC, SIX_SEVEN), (TIME, TOKYO)],
        outcomes=["success", "success"],
        final_text="It is 42, and Tokyo time is known.",
        roles=["user", "assistant", "tool", "tool", "assistant"],
    ),
    Shape(
        "anthropic_text_then_a_call",
        [
            Reply(
                [
                    role(),
                    text("Let me"),
                    text(" work that out."),
                    calls(call(1, "toolu_01", CALC, "")),
                    *[calls(call(1, args=piece)) for piece in split(SIX_SEVEN, 3)],
                    finish("tool_calls"),
                ]
            ),
            answer("The answer is 42."),
        ],
        executions=[(CALC, SIX_SEVEN)],
        outcomes=["success"],
        final_text="The answer is 42.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "groq_arguments_of_two_calls_in_one_chunk",
        [
            Reply(
                [
                    calls(call(0, "call_q1", CALC, '{"expression": '), call(1, "call_q2", TIME, '{"timezone": ')),
                    calls(call(0, args='"6*7"}'), call(1, args='"Asia/Tokyo"}')),
                    finish("tool_calls"),
                ]
            ),
            TWO_CALLS_DONE,
        ],
        executions=[(CALC, SIX_SEVEN), (TIME, TOKYO)],
        outcomes=["success", "success"],
        final_text="It is 42, and Tokyo time is known.",
        roles=["user", "assistant", "tool", "tool", "assistant"],
    ),
    Shape(
        "zero_argument_call_with_empty_string",
        [Reply([calls(call(0, "toolu_z", TIME, "")), calls(call(0, args="")), finish("tool_calls")]), answer("Done.")],
        executions=[(TIME, {})],
        outcomes=["success"],
        final_text="Done.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "zero_argument_call_without_arguments_key",
        [Reply([calls(call(0, "call_n", TIME)), finish("tool_calls")]), answer("Done.")],
        executions=[(TIME, {})],
        outcomes=["success"],
        final_text="Done.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "invalid_json_arguments",
        [
            Reply([calls(call(0, "call_bad", CALC, '{"expression": "6*7"')), finish("tool_calls")]),
            Reply([calls(call(0, "call_good", CALC, json.dumps(SIX_SEVEN))), finish("tool_calls")]),
            answer("It is 42."),
        ],
        executions=[(CALC, '{"expression": "6*7"'), (CALC, SIX_SEVEN)],
        outcomes=["error:validation_error", "success"],
        final_text="It is 42.",
        roles=["user", "assistant", "tool", "assistant", "tool", "assistant"],
    ),
    Shape(
        "unknown_tool",
        [
            Reply([calls(call(0, "call_u", "toolset__nope__nothing", "{}")), finish("tool_calls")]),
            answer("No such tool."),
        ],
        executions=[("toolset__nope__nothing", {})],
        outcomes=["error:unknown_tool"],
        final_text="No such tool.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "unknown_tool_with_a_name_no_provider_accepts",
        [
            Reply([calls(call(0, "call_w", "functions.web search", '{"q": "x"}')), finish("tool_calls")]),
            answer("I cannot search."),
        ],
        executions=[("functions.web search", {"q": "x"})],
        outcomes=["error:unknown_tool"],
        final_text="I cannot search.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "duplicate_ids_in_one_step_and_across_steps",
        [
            Reply(
                [
                    calls(call(0, "call_1", CALC, json.dumps(SIX_SEVEN)), call(1, "call_1", TIME, json.dumps(TOKYO))),
                    finish("tool_calls"),
                ]
            ),
            Reply([calls(call(0, "call_1", CALC, json.dumps({"expression": "1+1"}))), finish("tool_calls")]),
            TWO_CALLS_DONE,
        ],
        executions=[(CALC, SIX_SEVEN), (TIME, TOKYO), (CALC, {"expression": "1+1"})],
        outcomes=["success", "success", "success"],
        final_text="It is 42, and Tokyo time is known.",
        roles=["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"],
    ),
    Shape(
        "finish_reason_length",
        [answer("The first half of a long", reason="length")],
        final_text="The first half of a long",
        notice="cut by the token limit",
        finish_reason="length",
        roles=["user", "assistant"],
    ),
    Shape(
        "finish_reason_content_filter",
        [answer("I was about to", reason="content_filter")],
        final_text="I was about to",
        notice="content filter",
        finish_reason="content_filter",
        roles=["user", "assistant"],
    ),
    Shape(
        "content_filter_before_any_text",
        [Reply([role(), finish("content_filter")])],
        final_text="",
        notice="content filter",
        finish_reason="content_filter",
        roles=["user", "assistant"],
    ),
    Shape(
        "empty_stream",
        [Reply([])],
        final_text="",
        notice="without writing anything",
        roles=["user", "assistant"],
    ),
    Shape(
        "text_only", [answer("Just words, no tools.")], final_text="Just words, no tools.", roles=["user", "assistant"]
    ),
    Shape(
        "call_with_content_null",
        [
            Reply(
                [calls(call(0, "call_cn", CALC, json.dumps(SIX_SEVEN)), content=None), text(None), finish("tool_calls")]
            ),
            answer("42."),
        ],
        executions=[(CALC, SIX_SEVEN)],
        outcomes=["success"],
        final_text="42.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "rate_limited_then_success",
        [
            Reply(
                status=429,
                headers={"Retry-After": "0"},
                error={"error": {"message": "Rate limit", "type": "rate_limit"}},
            ),
            answer("Made it."),
        ],
        final_text="Made it.",
        roles=["user", "assistant"],
    ),
    Shape(
        "rate_limited_forever",
        [Reply(status=429, error={"error": {"message": "Rate limit reached", "type": "rate_limit"}})],
        status="failed",
        requests=4,  # 1 + TESSERA_PROVIDER_RETRIES (3): one retry policy, not LiteLLM's on top
        error="rate-limiting",
        roles=["user"],
    ),
    Shape(
        "connection_closed_mid_stream",
        [Reply([role(), text("The beginning"), text(" of an answer"), text(" never finished.")], cut_after=3)],
        status="failed",
        requests=1,  # text had reached the reader: never retried
        final_text="The beginning of an answer",
        error="cut off",
        roles=["user", "assistant"],
    ),
    Shape(
        "final_usage_chunk",
        [
            Reply([calls(call(0, "call_us", CALC, json.dumps(SIX_SEVEN))), finish("tool_calls"), usage(210, 18)]),
            Reply([*answer("42.").chunks, usage(260, 4)]),
        ],
        executions=[(CALC, SIX_SEVEN)],
        outcomes=["success"],
        final_text="42.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "reasoning_before_the_answer",
        [
            Reply(
                [
                    {
                        "delta": {"role": "assistant", "content": None, "reasoning_content": "The user wants "},
                        "finish_reason": None,
                    },
                    {"delta": {"reasoning_content": "a product."}, "finish_reason": None},
                    calls(call(0, "call_r", CALC, json.dumps(SIX_SEVEN))),
                    finish("tool_calls"),
                ]
            ),
            Reply(
                [
                    {"delta": {"reasoning_content": "Now I can answer."}, "finish_reason": None},
                    *answer("It is 42.").chunks,
                ]
            ),
        ],
        executions=[(CALC, SIX_SEVEN)],
        outcomes=["success"],
        final_text="It is 42.",
        roles=["user", "assistant", "tool", "assistant"],
    ),
    Shape(
        "model_that_calls_tools_forever",
        [Reply([calls(call(0, "call_loop", CALC, json.dumps(SIX_SEVEN))), finish("tool_calls")])],
        executions=[(CALC, SIX_SEVEN), (CALC, SIX_SEVEN)],
        outcomes=["success", "success"],
        requests=3,  # two tool steps, then one call without tools
        notice="Tool limit reached",
        final_text="",
        roles=["user", "assistant", "tool", "assistant", "tool", "system", "assistant"],
        max_iterations=2,
    ),
]
