"""The agent's spans, in OpenTelemetry's GenAI semantic conventions: a turn and each subagent
run are `invoke_agent` spans, each model call a `chat <model>` client span carrying the model,
provider, token counts (cached ones included) and finish reasons. Prompts and answers only when
an admin opts in (`AppSettings.trace_content`), with every known secret redacted.

Only OpenTelemetry's API is used: with no SDK set up (traces off) every span is the API's no-op
and these helpers cost next to nothing. The tool-call span is the executor's
(`toolsets/executor.py`), where policy, cache and breaker are known."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from core.redact import redact

TRACER_NAME = "tessera"
SYSTEM_AGENT = "Tessera"
# Span attributes are kept well below what collectors accept (often 64 kB or less per value).
CONTENT_LIMIT = 16_000


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def recording() -> bool:
    return trace.get_current_span().is_recording()


@contextlib.contextmanager
def agent(name: str, *, turn_id: int | None = None, chat_id: int | None = None, depth: int = 0) -> Iterator[Span]:
    """An `invoke_agent` span, current for the block: a turn (the assistant) or a subagent's run,
    so its model calls and tool calls nest under it."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    if turn_id is not None:
        attributes["tessera.turn.id"] = turn_id
    if chat_id is not None:
        attributes["gen_ai.conversation.id"] = str(chat_id)
    if depth:
        attributes["tessera.agent.depth"] = depth
    with tracer().start_as_current_span(f"invoke_agent {name}", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield span


def agent_finished(
    status: str,
    *,
    error_kind: str = "",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cached_tokens: int = 0,
) -> None:
    """The current agent span's outcome (called where the turn or run is closed)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute("tessera.outcome", status)
    span.set_attribute("gen_ai.usage.input_tokens", prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", completion_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", cached_tokens)
    if error_kind:
        span.set_attribute("error.type", error_kind)
    if status in ("failed", "error"):
        span.set_status(Status(StatusCode.ERROR, error_kind or status))


class ModelCall:
    """The span of one model call. Not made current: a model call has no children, and the
    stream it wraps is an async generator that may be closed from another task (Stop), where a
    context token could not be detached."""

    def __init__(
        self,
        *,
        model: str,
        provider: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        content: bool,
        server: str = "",
    ) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": provider,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "tessera.tools.offered": len(tools or ()),
        }
        if server:
            attributes["server.address"] = server
        self.content = content
        self.span = tracer().start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)
        if content and self.span.is_recording():
            self.span.set_attribute("gen_ai.input.messages", _content(messages))

    def finished(
        self,
        *,
        text: str,
        tool_calls: list[Any],
        finish_reason: str | None,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        requests: int,
    ) -> None:
        span = self.span
        if span.is_recording():
            span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", cached_tokens)
            span.set_attribute(
                "gen_ai.response.finish_reasons", [finish_reason or ("tool_calls" if tool_calls else "stop")]
            )
            span.set_attribute("tessera.provider.requests", requests)
            if self.content:
                output: dict[str, Any] = {"role": "assistant", "content": text}
                if tool_calls:
                    output["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in tool_calls]
                span.set_attribute("gen_ai.output.messages", _content([output]))
        span.end()

    def failed(self, kind: str, message: str, requests: int) -> None:
        span = self.span
        if span.is_recording():
            span.set_attribute("error.type", kind or "provider_error")
            span.set_attribute("tessera.provider.requests", requests)
            # Provider errors can quote a credential back: redacted like every error text.
            span.set_status(Status(StatusCode.ERROR, redact(message)[:200]))
        span.end()

    def ended(self) -> None:
        """A call stopped by the reader (or a task cancelled) before it completed."""
        if self.span.is_recording():
            self.span.set_attribute("tessera.outcome", "stopped")
        self.span.end()


def _content(value: Any) -> str:
    text = redact(json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT] + "…"


@contextlib.contextmanager
def delegation_call(name: str, call_id: str, toolset: str) -> Iterator[Span]:
    """The `execute_tool` span of a `delegate_to_<agent>` call (run by the delegator, not the
    executor): the subagent's `invoke_agent` span nests under it, as any tool's work does."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "tessera.toolset": toolset,
    }
    with tracer().start_as_current_span(f"execute_tool {name}", attributes=attributes) as span:
        yield span


def call_finished(span: Span, *, error: bool) -> None:
    if span.is_recording():
        span.set_attribute("tessera.tool.outcome", "error" if error else "success")
        if error:
            span.set_status(Status(StatusCode.ERROR, "error"))
