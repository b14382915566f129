from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (and every provider) does not.
    raise ValueError(f"{name} is not valid JSON")


def parse_arguments(raw: str) -> dict[str, Any]:
    """A tool call's arguments as a dict; raises ValueError with a message the model can act on.

    Strict JSON: an empty string means no arguments, anything else must be one JSON object."""
    text = raw.strip() or "{}"
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


def transcript_arguments(raw: str) -> str:
    """What a call's arguments become in a transcript sent to a provider: the model's own text
    when it is one JSON object, else "{}". Anthropic and Gemini parse the arguments of every
    earlier call, so one broken string would fail this request and every later one of the chat;
    the text the model really sent stays in the tool's execution record and error result."""
    try:
        parse_arguments(raw)
    except ValueError:
        return "{}"
    return raw.strip() or "{}"


_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def transcript_name(name: str) -> str:
    """What a call's tool name becomes in a transcript: providers accept only `[A-Za-z0-9_-]`,
    at most 64 characters, in a tool name. Every name Tessera offers already is one; a model
    that calls a made-up name ("functions.web search") gets its unknown-tool error under this
    form of it, and the name it really sent stays in the execution record."""
    return _NAME_UNSAFE.sub("_", name)[:64] or "unknown_tool"


@dataclass
class ToolCall:
    id: str
    name: str
    # Exactly what the model streamed (possibly not JSON at all): the tool executor validates
    # it and reports errors against it. The transcript uses `transcript_arguments`.
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError with a message the model can act on."""
        return parse_arguments(self.arguments)

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": transcript_name(self.name), "arguments": transcript_arguments(self.arguments)},
        }


@dataclass
class ToolResult:
    call_id: str
    content: str
    is_error: bool = False
    cancelled: bool = False
    # Anything the host wants to keep beside the model-facing text (full result, error type…).
    data: dict[str, Any] = field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.content}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Of the prompt tokens, those the provider read from its prompt cache (when it says).
    cached_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class AssistantMessage:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    # As LiteLLM normalises it: "stop", "tool_calls", "length", "content_filter", or None.
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    # The model's reasoning ("thinking") text, if the provider streams it apart from the answer.
    # Never part of the answer and never sent back: several providers reject it in a request.
    reasoning: str = ""

    def to_openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message


@dataclass
class TextDelta:
    text: str


@dataclass
class ToolCallOpened:
    position: int
    id: str
    name: str


@dataclass
class ToolArguments:
    """A call's arguments as streamed so far (incomplete JSON), now and then while they stream."""

    position: int
    text: str


@dataclass
class Completed:
    message: AssistantMessage


StreamEvent = TextDelta | ToolCallOpened | ToolArguments | Completed
