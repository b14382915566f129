"""The one place Tessera talks to LiteLLM.

It owns: the streaming call, retries with backoff (only before the first chunk: once text has
reached the user a retry would duplicate it), the abort-vs-retry exception lists, usage, and the
tool-call accumulator that irons out provider differences in how tool calls are streamed.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

# Must be set before the import: without it LiteLLM fetches its cost map over the network at
# import time and, offline, retries for several seconds.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

from chat.demo import register as register_demo_provider

from .exceptions import ProviderError
from .transcript import new_call_id
from .types import AssistantMessage, Completed, StreamEvent, TextDelta, ToolCall, ToolCallOpened, Usage

litellm.suppress_debug_info = True
# LiteLLM gives its loggers a stderr handler of their own and lets them propagate too: every
# record of theirs would be written twice, once past the host's redacting handler. The host's
# logging configuration alone decides where they go.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    logging.getLogger(_name).handlers.clear()
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

    def arguments_complete(self) -> bool:
        try:
            json.loads("".join(self.parts))
        except ValueError:
            return False
        return True


class ToolCallAccumulator:
    """Joins streamed tool-call deltas into whole calls, in the order they were opened.

    Providers differ: OpenAI streams id+name first, then argument pieces by index; Gemini sends
    each call whole; Groq may put pieces of two calls in one chunk; Ollama may put every parallel
    call at index 0, with a new id or with the same one; Anthropic sends "" for a call without
    arguments, others send no arguments at all. The rule that covers them: a fragment carrying a
    name starts a new call when the call at its place already has a name and this fragment has
    another id or another name, or brings arguments after that call's arguments were already
    complete JSON (some servers repeat the name and id on every fragment of one call). A fragment without a
    name always continues a call: the one at its index, else the one with its id, else the last.
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}
        self._named = 0

    def add(self, deltas: list[Any]) -> list[tuple[int, str, str]]:
        """Fold in deltas; returns (position, id, name) for each call whose name just became known."""
        opened: list[tuple[int, str, str]] = []
        for delta in deltas:
            index = _get(delta, "index")
            call_id = _get(delta, "id")
            call_id = call_id if isinstance(call_id, str) else ""
            function = _get(delta, "function")
            name = _get(function, "name") if function is not None else None
            name = name if isinstance(name, str) else ""
            arguments = _get(function, "arguments") if function is not None else None
            if isinstance(arguments, dict):  # a few servers send the arguments as an object
                arguments = json.dumps(arguments)
            arguments = arguments if isinstance(arguments, str) else ""
            position = self._place(index, call_id, name, arguments)
            slot = self._slots[position]
            if call_id and not slot.id:
                slot.id = call_id
                self._by_id.setdefault(call_id, position)
            if name and not slot.name:
                slot.name = name
                opened.append((self._named, slot.id, name))
                self._named += 1
            if arguments:
                slot.parts.append(arguments)
        return opened

    def _place(self, index: Any, call_id: str, name: str, arguments: str) -> int:
        if isinstance(index, int) and not isinstance(index, bool):
            position = self._by_index.get(index)
        elif call_id:
            position = self._by_id.get(call_id)
        elif not name and self._slots:
            position = len(self._slots) - 1
        else:
            position = None
        if position is not None and name:
            slot = self._slots[position]
            other_id = bool(call_id and slot.id and call_id != slot.id)
            repeated = name != slot.name or (slot.arguments_complete() and bool(arguments.strip()))
            if slot.name and (other_id or repeated):
                position = None
        if position is None:
            self._slots.append(_Slot())
            position = len(self._slots) - 1
        if isinstance(index, int) and not isinstance(index, bool):
            self._by_index[index] = position
        return position

    def calls(self) -> list[ToolCall]:
        """The calls so far, each with the provider's id (or a new one if it sent none) and its
        arguments exactly as streamed ("" becomes "{}"). Ids are made unique by the loop, which
        knows the whole transcript."""
        result = []
        for slot in self._slots:
            if not slot.name:
                continue  # a fragment with no name never became a callable tool
            slot.id = slot.id or new_call_id()  # once, so every snapshot names the call alike
            arguments = "".join(slot.parts).strip() or "{}"
            result.append(ToolCall(id=slot.id, name=slot.name, arguments=arguments))
        return result


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


CompletionFn = Callable[..., Awaitable[Any]]

# Longest wait before a retry. A provider asking for a longer one (Retry-After) will not have
# recovered within a turn anyone waits for: the turn fails at once with the provider's error.
MAX_RETRY_WAIT_S = 30.0

# Finish reasons as LiteLLM normalises them, plus the raw names a few OpenAI-compatible servers
# and proxies pass through unchanged.
_FINISH_REASONS = {
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_length": "length",
    "content_filtered": "content_filter",
    "safety": "content_filter",
    "refusal": "content_filter",
    "recitation": "content_filter",
    "prohibited_content": "content_filter",
    "blocklist": "content_filter",
    "spii": "content_filter",
    "guardrail_intervened": "content_filter",
}

# (model, api_base) of OpenAI-compatible servers that refused `stream_options`: asked once per
# process, then not again.
_NO_STREAM_OPTIONS: set[tuple[str, str]] = set()


def normalize_finish_reason(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    reason = value.strip().lower()
    return _FINISH_REASONS.get(reason, reason)


@dataclass
class ModelConfig:
    model: str
    api_base: str | None = None
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    retries: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 120.0
    max_wait_s: float = MAX_RETRY_WAIT_S


class LiteLLMModel:
    """Streams one model response as events; see the module docstring for what it owns."""

    def __init__(self, config: ModelConfig, completion: CompletionFn | None = None) -> None:
        self.config = config
        # Tests hand in a scripted function with LiteLLM's signature; production uses LiteLLM.
        self._completion = completion or litellm.acompletion
        self.partial = AssistantMessage()
        self.requests = 0  # HTTP requests this model has made, retries included

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(self.config.extra)
        # Usage arrives only when asked for. LiteLLM drops the option for providers that do not
        # take it (drop_params) and still reports their usage in a last chunk.
        kwargs.setdefault("stream_options", {"include_usage": True})
        if self._server_key() in _NO_STREAM_OPTIONS:
            kwargs.pop("stream_options", None)
        kwargs.update(
            model=self.config.model,
            messages=messages,
            stream=True,
            timeout=self.config.timeout_s,
            # One retry policy, Tessera's (see _open). LiteLLM's OpenAI client would otherwise
            # retry twice on its own under each attempt, and `num_retries` (also settable in an
            # admin's extra params) would add LiteLLM's wrapper retries on top.
            max_retries=0,
            num_retries=0,
        )
        if tools:
            kwargs["tools"] = tools
        if self.config.api_base:
            kwargs["api_base"] = self.config.api_base
        if self.config.api_key:
            kwargs["api_key"] = self.config.api_key
        return kwargs

    def _server_key(self) -> tuple[str, str]:
        return (self.config.model, self.config.api_base or "")

    async def _open(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> tuple[Any, Any]:
        """Opens the stream and waits for its first chunk, retrying what is worth retrying:
        1 + `retries` requests at most, `backoff_s` doubling, or the provider's Retry-After when
        longer. Nothing has reached the reader yet, so a retry cannot duplicate anything."""
        kwargs = self._kwargs(messages, tools)
        attempt = 0
        while True:
            response = None
            try:
                self.requests += 1
                response = await self._completion(**kwargs)
                iterator = response.__aiter__()
                first = await iterator.__anext__()
                return response, _chain(first, iterator)
            except StopAsyncIteration:
                return response, _empty()
            except RETRYABLE_ERRORS as exc:
                await _close(response)
                attempt += 1
                delay = self._delay(exc, attempt)
                if attempt > self.config.retries or delay is None:
                    kind, message = describe_error(exc)
                    raise ProviderError(message, kind=kind, retryable=True) from exc
                await asyncio.sleep(delay)
            except ABORT_ERRORS as exc:
                await _close(response)
                if "stream_options" in kwargs and _rejects_stream_options(exc):
                    # An OpenAI-compatible server that does not know the option: ask without it
                    # (the answer then simply carries no usage). Not a retry: nothing was served.
                    _NO_STREAM_OPTIONS.add(self._server_key())
                    kwargs.pop("stream_options")
                    continue
                kind, message = describe_error(exc)
                raise ProviderError(message, kind=kind) from exc
            except Exception as exc:  # an unknown provider failure must still end as a clear error
                await _close(response)
                kind, message = describe_error(exc)
                raise ProviderError(message, kind=kind) from exc

    def _delay(self, exc: BaseException, attempt: int) -> float | None:
        """Seconds to wait before attempt `attempt` + 1, or None when the provider asks for
        longer than `max_wait_s`."""
        retry_after = retry_after_seconds(exc)
        if retry_after is not None and retry_after > self.config.max_wait_s:
            return None
        backoff = self.config.backoff_s * (2 ** (attempt - 1))
        return min(max(backoff, retry_after or 0.0), self.config.max_wait_s)

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
        reasoning: list[str] = []
        try:
            async for chunk in chunks:
                usage = _get(chunk, "usage")
                if usage:
                    # The last report wins: some providers send running totals, and the final
                    # `choices: []` chunk carries the whole call's usage.
                    self.partial.usage = Usage(
                        prompt_tokens=_count(_get(usage, "prompt_tokens")),
                        completion_tokens=_count(_get(usage, "completion_tokens")),
                    )
                choices = _get(chunk, "choices") or []
                if not choices:
                    continue
                choice = choices[0]
                delta = _get(choice, "delta")
                finish_reason = normalize_finish_reason(_get(choice, "finish_reason"))
                if finish_reason:
                    self.partial.finish_reason = finish_reason
                if delta is None:
                    continue
                # Reasoning ("thinking") streams beside the answer on some providers; it is
                # kept apart and never becomes answer text.
                thought = _get(delta, "reasoning_content")
                if isinstance(thought, str) and thought:
                    reasoning.append(thought)
                    self.partial.reasoning = "".join(reasoning)
                content = _get(delta, "content")
                if isinstance(content, str) and content:
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


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _rejects_stream_options(exc: BaseException) -> bool:
    text = str(getattr(exc, "message", "") or exc).lower()
    return "stream_options" in text or "include_usage" in text


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


def retry_after_seconds(exc: BaseException) -> float | None:
    """The wait a provider asked for, from `retry-after-ms`, or `Retry-After` in seconds or as
    an HTTP date; None if it asked for none (or sent something unreadable)."""
    for headers in _error_headers(exc):
        milliseconds = _header(headers, "retry-after-ms")
        if milliseconds is not None:
            try:
                value = float(milliseconds) / 1000
            except ValueError:
                value = math.nan
            if math.isfinite(value):
                return max(0.0, value)
        value_text = _header(headers, "retry-after")
        if value_text is None:
            continue
        try:
            seconds = float(value_text)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value_text)
            except (TypeError, ValueError, IndexError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())
        return max(0.0, seconds) if math.isfinite(seconds) else None
    return None


def _error_headers(exc: BaseException) -> list[Any]:
    # LiteLLM keeps the provider's headers on the exception itself; its `response` is often a
    # stand-in without them.
    found = [getattr(exc, "litellm_response_headers", None), getattr(exc, "headers", None)]
    response = getattr(exc, "response", None)
    found.append(getattr(response, "headers", None))
    return [headers for headers in found if headers]


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, dict):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:
        return None
    return str(value).strip() if value is not None else None


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
