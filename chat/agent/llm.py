"""The one place Tessera talks to LiteLLM.

It owns: the streaming call, retries with backoff (only before the first chunk: once text has
reached the user a retry would duplicate it), the abort-vs-retry exception lists, usage, and the
tool-call accumulator that irons out provider differences in how tool calls are streamed.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

# Must be set before the import: without it LiteLLM fetches its cost map over the network at
# import time and, offline, retries for several seconds.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

from chat.demo import register as register_demo_provider

from .exceptions import ProviderError
from .types import AssistantMessage, Completed, StreamEvent, TextDelta, ToolCall, ToolCallOpened, Usage

litellm.suppress_debug_info = True
# The offline demo model is a LiteLLM custom provider. It is registered here, beside the one seam
# that talks to LiteLLM, so every process that calls a model has it and no other loads LiteLLM.
register_demo_provider()
# Providers reject parameters they do not know (e.g. a demo-only knob); drop instead of failing.
litellm.drop_params = True

# Errors worth another try: the provider is busy or briefly unreachable.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.BadGatewayError,
    litellm.APIConnectionError,
    litellm.Timeout,
)
# Errors no retry will fix: configuration or request problems.
ABORT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.NotFoundError,
    litellm.BadRequestError,
    litellm.ContextWindowExceededError,
    litellm.ContentPolicyViolationError,
    litellm.UnsupportedParamsError,
    litellm.BudgetExceededError,
)


def describe_error(exc: BaseException) -> tuple[str, str]:
    """A (kind, message) pair fit to show a user: no stack trace, no request dump."""
    status = getattr(exc, "status_code", None)
    if isinstance(exc, litellm.RateLimitError):
        return "rate_limited", "The model provider is rate-limiting requests. Try again in a moment."
    if isinstance(exc, litellm.AuthenticationError):
        return "auth", "The model provider rejected the API key. An administrator needs to check it."
    if isinstance(exc, litellm.NotFoundError):
        return "not_found", "The model provider does not know this model. An administrator needs to check it."
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window", "This conversation is too long for the model. Start a new chat."
    if isinstance(exc, litellm.Timeout):
        return "timeout", "The model provider did not answer in time."
    if isinstance(exc, litellm.APIConnectionError):
        return "connection", "Could not reach the model provider."
    if isinstance(exc, RETRYABLE_ERRORS) or (isinstance(status, int) and status >= 500):
        return "unavailable", "The model provider is having trouble right now."
    detail = str(getattr(exc, "message", "") or exc).strip().splitlines()[0:1]
    text = detail[0][:300] if detail else type(exc).__name__
    return "provider_error", f"The model provider returned an error: {text}"


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """Joins streamed tool-call deltas into whole calls, in the order they were opened.

    Providers differ: OpenAI streams id+name first, then argument pieces by index; Gemini sends
    each call whole; Ollama may put every parallel call at index 0 (a new id at a used index
    opens a new slot); Anthropic sends "" for a call without arguments.
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, int] = {}

    def add(self, deltas: list[Any]) -> list[tuple[int, str, str]]:
        """Fold in deltas; returns (position, id, name) for each call whose name just became known."""
        opened: list[tuple[int, str, str]] = []
        for delta in deltas:
            index = _get(delta, "index")
            call_id = _get(delta, "id") or ""
            function = _get(delta, "function")
            name = (_get(function, "name") or "") if function is not None else ""
            arguments = (_get(function, "arguments") or "") if function is not None else ""
            key = index if isinstance(index, int) else len(self._slots)
            position = self._by_index.get(key)
            if position is None or (call_id and self._slots[position].id and call_id != self._slots[position].id):
                self._slots.append(_Slot())
                position = len(self._slots) - 1
                self._by_index[key] = position
            slot = self._slots[position]
            if call_id and not slot.id:
                slot.id = call_id
            if name and not slot.name:
                slot.name = name
                opened.append((position, slot.id, name))
            if arguments:
                slot.parts.append(arguments)
        return opened

    def calls(self) -> list[ToolCall]:
        result = []
        for slot in self._slots:
            if not slot.name:
                continue  # a fragment with no name never became a callable tool
            arguments = "".join(slot.parts).strip() or "{}"
            result.append(ToolCall(id=slot.id or f"call_{uuid.uuid4().hex[:24]}", name=slot.name, arguments=arguments))
        return result


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


CompletionFn = Callable[..., Awaitable[Any]]


@dataclass
class ModelConfig:
    model: str
    api_base: str | None = None
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    retries: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 120.0


class LiteLLMModel:
    """Streams one model response as events; see the module docstring for what it owns."""

    def __init__(self, config: ModelConfig, completion: CompletionFn | None = None) -> None:
        self.config = config
        # Tests hand in a scripted function with LiteLLM's signature; production uses LiteLLM.
        self._completion = completion or litellm.acompletion
        self.partial = AssistantMessage()

    async def _open(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> tuple[Any, Any]:
        kwargs: dict[str, Any] = dict(self.config.extra)
        kwargs.update(model=self.config.model, messages=messages, stream=True, timeout=self.config.timeout_s)
        if tools:
            kwargs["tools"] = tools
        if self.config.api_base:
            kwargs["api_base"] = self.config.api_base
        if self.config.api_key:
            kwargs["api_key"] = self.config.api_key
        attempt = 0
        while True:
            response = None
            try:
                response = await self._completion(**kwargs)
                iterator = response.__aiter__()
                first = await iterator.__anext__()
                return response, _chain(first, iterator)
            except StopAsyncIteration:
                return response, _empty()
            except RETRYABLE_ERRORS as exc:
                await _close(response)
                attempt += 1
                if attempt > self.config.retries:
                    kind, message = describe_error(exc)
                    raise ProviderError(message, kind=kind, retryable=True) from exc
                await asyncio.sleep(self._delay(exc, attempt))
            except ABORT_ERRORS as exc:
                await _close(response)
                kind, message = describe_error(exc)
                raise ProviderError(message, kind=kind) from exc
            except Exception as exc:  # an unknown provider failure must still end as a clear error
                await _close(response)
                kind, message = describe_error(exc)
                raise ProviderError(message, kind=kind) from exc

    def _delay(self, exc: BaseException, attempt: int) -> float:
        retry_after = _retry_after(exc)
        backoff = self.config.backoff_s * (2 ** (attempt - 1))
        return min(max(backoff, retry_after or 0.0), 30.0)

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> AsyncIterator[StreamEvent]:
        """Yields TextDelta/ToolCallOpened events, then one Completed.

        `self.partial` always holds what has arrived so far, so a caller that stops iterating
        (Stop) or sees a ProviderError mid-stream can keep the partial answer.
        """
        self.partial = AssistantMessage()
        response, chunks = await self._open(messages, tools)
        accumulator = ToolCallAccumulator()
        text: list[str] = []
        try:
            async for chunk in chunks:
                usage = _get(chunk, "usage")
                if usage:
                    self.partial.usage = Usage(
                        prompt_tokens=_get(usage, "prompt_tokens") or 0,
                        completion_tokens=_get(usage, "completion_tokens") or 0,
                    )
                choices = _get(chunk, "choices") or []
                if not choices:
                    continue
                choice = choices[0]
                delta = _get(choice, "delta")
                if _get(choice, "finish_reason"):
                    self.partial.finish_reason = _get(choice, "finish_reason")
                if delta is None:
                    continue
                content = _get(delta, "content")
                if content:
                    text.append(content)
                    self.partial.content = "".join(text)
                    yield TextDelta(content)
                tool_deltas = _get(delta, "tool_calls")
                if tool_deltas:
                    for position, call_id, name in accumulator.add(list(tool_deltas)):
                        yield ToolCallOpened(position, call_id, name)
                    self.partial.tool_calls = accumulator.calls()
        except Exception as exc:
            kind, message = describe_error(exc)
            raise ProviderError(f"{message} The answer was cut off.", kind=kind) from exc
        finally:
            await _close(response)
        self.partial.content = "".join(text)
        # Drive the loop from the calls actually received, not from finish_reason: several
        # providers report "stop" on a response that carries tool calls.
        self.partial.tool_calls = accumulator.calls()
        yield Completed(self.partial)


async def _chain(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


async def _empty() -> AsyncIterator[Any]:
    return
    yield  # pragma: no cover - makes this an async generator


async def _close(response: Any) -> None:
    closer = getattr(response, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except Exception:  # closing a broken stream must not mask the real error
        pass


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def warm_up() -> None:
    """One offline call through LiteLLM. Its first call in a process imports a good deal lazily
    (about 2 s here); a worker pays that at start-up instead of in its first user's turn."""
    tool = {"type": "function", "function": {"name": "warm_up", "parameters": {"type": "object"}}}
    response = await litellm.acompletion(
        model="demo/tessera",
        messages=[{"role": "user", "content": "warm up"}],
        tools=[tool],  # the tools path imports more than plain text does
        stream=True,
        tokens_per_second=0,
    )
    async for _ in response:
        pass
