"""A scripted model, toolbox and event sink for the agent loop and its LiteLLM seam (no Django,
no network).

The script stands in for `litellm.acompletion`: each model call pops the next list of chunks,
shaped like LiteLLM's streaming deltas, so the seam's accumulator and retries run for real.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import litellm

from agent.llm import LiteLLMModel, ModelConfig
from agent.loop import Agent, CancelToken
from agent.types import AssistantMessage, ToolCall, ToolResult


def text_chunk(text: str) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}, "finish_reason": None}]}


def call_chunk(index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None) -> dict:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    delta: dict[str, Any] = {"function": function}
    if index is not None:
        delta["index"] = index
    if id is not None:
        delta["id"] = id
    return {"choices": [{"delta": {"tool_calls": [delta]}, "finish_reason": None}]}


def finish(reason: str = "stop") -> dict[str, Any]:
    return {"choices": [{"delta": {}, "finish_reason": reason}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


class Stream:
    def __init__(self, chunks: list[Any], gate: asyncio.Event | None = None, after: int = 0) -> None:
        self.chunks = chunks
        self.gate = gate
        self.after = after
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Any]:
        for i, chunk in enumerate(self.chunks):
            if self.gate is not None and i == self.after:
                await self.gate.wait()  # a model that stalls mid-answer
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        self.closed = True


class Script:
    """Scripted stand-in for litellm.acompletion; records what each call was sent. With
    `window`, it answers a request of more tokens than that (as LiteLLM counts them) the way a
    real provider does: a context-length error, before any response is used up."""

    def __init__(self, *responses: Any, window: int | None = None) -> None:
        self.responses = list(responses)
        self.calls: list[dict[str, Any]] = []
        self.streams: list[Stream] = []
        self.window = window
        self.sizes: list[int] = []  # each request's tokens, refused ones too

    async def __call__(self, **kwargs: Any) -> Stream:
        self.calls.append({**kwargs, "messages": json.loads(json.dumps(kwargs["messages"]))})
        if self.window is not None:
            size = litellm.token_counter(model=kwargs["model"], messages=kwargs["messages"], tools=kwargs.get("tools"))
            self.sizes.append(size)
            if size > self.window:
                raise litellm.ContextWindowExceededError(
                    f"This model's maximum context length is {self.window} tokens. However, your messages "
                    f"resulted in {size} tokens.",
                    model="x",
                    llm_provider="openai",
                )
        response = self.responses.pop(0)
        if isinstance(response, BaseException):
            raise response
        stream = response if isinstance(response, Stream) else Stream(response)
        self.streams.append(stream)
        return stream


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.arguments: list[tuple[int, int, str]] = []

    async def step_started(self, step: int) -> None:
        self.events.append(("step", step))

    async def text(self, step: int, delta: str) -> None:
        self.events.append(("text", step, delta))

    async def tool_call_opened(self, step: int, position: int, call_id: str, name: str) -> None:
        self.events.append(("opened", step, position, name))

    async def tool_arguments(self, step: int, position: int, text: str) -> None:
        self.arguments.append((step, position, text))

    async def assistant_message(self, step: int, message: AssistantMessage, status: str) -> None:
        self.events.append(("assistant", step, status, message.content, [c.name for c in message.tool_calls]))

    async def tools_started(self, step: int, calls: list[ToolCall]) -> None:
        self.events.append(("tools", step, [c.name for c in calls]))

    async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult) -> None:
        self.events.append(("tool_done", step, position, result.is_error, result.cancelled))

    async def system_message(self, step: int, content: str) -> None:
        self.events.append(("system", step, content))

    async def notice(self, kind: str, text: str) -> None:
        self.events.append(("notice", kind, text))

    async def steered(self, step: int, texts: list[str]) -> None:
        self.events.append(("steered", step, texts))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]


class Tools:
    """A toolbox of async functions keyed by name; exceptions become error results the same
    way the real executor reports them."""

    def __init__(self, **funcs: Any) -> None:
        self.funcs = funcs
        self.places: list[tuple[str, int, int]] = []

    def specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in self.funcs]

    async def run(self, call: ToolCall, step: int, position: int) -> ToolResult:
        self.places.append((call.name, step, position))
        func = self.funcs.get(call.name)
        if func is None:
            return ToolResult(call.id, f"Error: unknown tool {call.name}", is_error=True)
        try:
            value = await func(**call.parsed_arguments())
        except Exception as exc:
            return ToolResult(call.id, f"Error: {exc}", is_error=True)
        return ToolResult(call.id, json.dumps(value))


def make_agent(
    script: Script, tools: Tools, *, max_iterations: int = 5, retries: int = 2
) -> tuple[Agent, RecordingSink]:
    sink = RecordingSink()
    model = LiteLLMModel(ModelConfig(model="scripted/test", retries=retries, backoff_s=0), completion=script)
    return Agent(model, tools, sink, CancelToken(), max_iterations=max_iterations), sink


USER = [{"role": "user", "content": "hi"}]


def rate_limited(headers: dict[str, str]) -> litellm.RateLimitError:
    error = litellm.RateLimitError("slow down", llm_provider="openai", model="x")
    error.litellm_response_headers = httpx.Headers(headers)  # type: ignore[attr-defined]
    return error
