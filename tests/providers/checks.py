"""What "valid for the provider" means, checked on a transcript in OpenAI's format and on what
LiteLLM's Anthropic and Gemini request transformations make of it (no network: the
transformation functions alone, as LiteLLM runs them before sending)."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

ANTHROPIC_ID = re.compile(r"^[A-Za-z0-9_-]+$")
# What OpenAI, Anthropic and Gemini all accept as a function name.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _strict_object(text: Any) -> dict[str, Any]:
    assert isinstance(text, str), f"arguments are not a string: {text!r}"
    value = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(AssertionError(name)))
    assert isinstance(value, dict), f"arguments are not a JSON object: {text!r}"
    return value


def check_stored(messages: list[dict[str, Any]]) -> None:
    """A stored conversation: every tool call with an id unique in it and JSON-object
    arguments, answered by exactly one tool message after it. (The order and the empty
    messages a dead worker or an empty answer may leave are `canonical`'s business.)"""
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert len(ids) == len(set(ids)) and all(ids), f"tool call ids not unique: {ids}"
    for message in messages:
        assert "reasoning_content" not in message, message
        for call in message.get("tool_calls") or []:
            _strict_object(call["function"]["arguments"])
    answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert Counter(answers) == Counter(ids), f"calls {ids} answered by {answers}"


def check_openai(messages: list[dict[str, Any]]) -> None:
    """Every tool call: an id unique in the conversation, JSON-object arguments, answered by
    exactly one tool message right after its assistant message; no tool message answers
    nothing; nothing a provider may reject (reasoning fields, empty assistant messages)."""
    seen: set[str] = set()
    index = 0
    while index < len(messages):
        message = messages[index]
        assert "reasoning_content" not in message and "thinking_blocks" not in message, message
        role = message["role"]
        assert role != "tool", f"tool message #{index} answers no call just before it: {message}"
        if role == "assistant":
            calls = message.get("tool_calls") or []
            assert calls or message.get("content"), f"empty assistant message #{index}"
            ids = []
            for call in calls:
                assert call["id"] and call["id"] not in seen, f"tool call id reused: {call['id']!r}"
                assert TOOL_NAME.match(call["function"]["name"]), call
                _strict_object(call["function"]["arguments"])
                seen.add(call["id"])
                ids.append(call["id"])
            answers = []
            while index + 1 < len(messages) and messages[index + 1]["role"] == "tool":
                index += 1
                answers.append(messages[index]["tool_call_id"])
            assert Counter(answers) == Counter(ids), f"calls {ids} answered by {answers}"
        index += 1


def anthropic_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    return AnthropicConfig().transform_request(
        model="claude-sonnet-4-5",
        messages=[dict(m) for m in messages],  # type: ignore[misc]
        optional_params={"tools": tools, "max_tokens": 1024} if tools else {"max_tokens": 1024},
        litellm_params={},
        headers={},
    )


def check_anthropic(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    """Runs LiteLLM's Anthropic transformation (it raises on what it cannot convert) and checks
    what Anthropic's API itself requires of the result."""
    request = anthropic_request(messages, tools)
    converted = request["messages"]
    assert converted and converted[0]["role"] == "user"
    uses: set[str] = set()
    for position, message in enumerate(converted):
        assert message["role"] in ("user", "assistant")
        if position:
            assert message["role"] != converted[position - 1]["role"], "roles must alternate"
        blocks = message["content"] if isinstance(message["content"], list) else [message["content"]]
        assert blocks, f"empty message #{position}"
        for block in blocks:
            if isinstance(block, str):
                assert block.strip(), "empty text"
                continue
            if block["type"] == "text":
                assert block["text"].strip(), f"empty text block in message #{position}"
            if block["type"] == "tool_use":
                assert isinstance(block["input"], dict), block
                assert TOOL_NAME.match(block["name"]), block
                assert ANTHROPIC_ID.match(block["id"]) and block["id"] not in uses, block["id"]
                uses.add(block["id"])
        wanted = [b["id"] for b in blocks if isinstance(b, dict) and b["type"] == "tool_use"]
        if wanted:
            following = converted[position + 1]["content"] if position + 1 < len(converted) else []
            results = [b["tool_use_id"] for b in following if isinstance(b, dict) and b["type"] == "tool_result"]
            assert Counter(results) == Counter(wanted), f"tool_use {wanted} answered by {results}"


def check_gemini(messages: list[dict[str, Any]]) -> None:
    """Runs LiteLLM's Gemini conversion and checks what Gemini requires: no empty part or
    text, object arguments, and each function call answered by a response of the same name."""
    from litellm.llms.vertex_ai.gemini.transformation import gemini_convert_messages_with_history

    contents = gemini_convert_messages_with_history(
        messages=[dict(m) for m in messages if m["role"] != "system"],  # type: ignore[misc]
        model="gemini-2.0-flash",
    )
    for position, content in enumerate(contents):
        parts = content["parts"]
        assert parts, f"content #{position} has no parts"
        for part in parts:
            if "text" in part:
                assert part["text"].strip(), f"empty text part in content #{position}"
            if "function_call" in part:
                assert isinstance(part["function_call"]["args"], dict), part
        called = [p["function_call"]["name"] for p in parts if "function_call" in p]
        if called:
            following = contents[position + 1]["parts"] if position + 1 < len(contents) else []
            answered = [p["function_response"]["name"] for p in following if "function_response" in p]
            assert answered == called, f"function calls {called} answered as {answered}"
