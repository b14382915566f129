"""The one place Tessera talks to LiteLLM.

It owns: the streaming call, retries with backoff (only before the first chunk: once text has
reached the user a retry would duplicate it), usage, and finish reasons. Beside it, in the same
seam: `provider_errors` (the abort-vs-retry exception lists and user-facing messages),
`accumulator` (which irons out provider differences in how tool calls are streamed) and
`openai_stream`, the fast path: for a provider that speaks OpenAI chat completions, LiteLLM
resolves the model and builds the request, and Tessera reads the stream itself. Both paths feed
the same loop below, so retries, errors, usage and finish reasons behave the same on either.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

# Must be set before the import: without it LiteLLM fetches its cost map over the network at
# import time and, offline, retries for several seconds.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

from core import metrics

from . import openai_stream, providers, spans, tokens
from .accumulator import get_field
from .context import Fitter, Summarizer
from .exceptions import ProviderError
from .model_config import ModelConfig as ModelConfig  # re-exported: callers configure the seam from here
from .provider_errors import (
    ABORT_ERRORS,
    RETRYABLE_ERRORS,
    describe_error,
    rejects_stream_options,
    retry_after_seconds,
)
from .received import Received
from .tokens import count as _count
from .types import AssistantMessage, Completed, StreamEvent, TextDelta, ToolArguments, ToolCallOpened, Usage

litellm.suppress_debug_info = True
log = logging.getLogger(__name__)
# LiteLLM gives its loggers a stderr handler of their own and lets them propagate too: every
# record of theirs would be written twice, once past the host's redacting handler. The host's
# logging configuration alone decides where they go.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
    logging.getLogger(_name).handlers.clear()
# Providers reject parameters they do not know (e.g. a demo-only knob); drop instead of failing.
litellm.drop_params = True

CompletionFn = Callable[..., Awaitable[Any]]

# Finish reasons as LiteLLM normalises them, plus the raw names a few OpenAI-compatible servers
# and proxies pass through unchanged.
# How often a call's streaming arguments are reported (ToolArguments).
ARGUMENTS_INTERVAL_S = 0.15

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


class LiteLLMModel:
    """Streams one model response as events; see the module docstring for what it owns."""

    def __init__(self, config: ModelConfig, completion: CompletionFn | None = None) -> None:
        providers.ensure(config.model)  # a custom provider's model, in a process that has not used one yet
        self.config = config
        # Tests hand in a scripted function with LiteLLM's signature; production uses LiteLLM.
        self._completion = completion or litellm.acompletion
        # The fast path's route, when this model has one; a scripted completion is LiteLLM's.
        self.route = openai_stream.resolve(config) if config.fast_path and completion is None else None
        self._received = Received(config.model)
        self.requests = 0  # HTTP requests this model has made, retries included
        self.provider = _provider(config.model, config.api_base)
        self.budget = tokens.context_budget(config.model, config.context_limit, config.answer_reserve, config.extra)
        self.cache_markers = tokens.takes_cache_markers(config.model)

    def count_message(self, message: dict[str, Any]) -> int:
        """A message's tokens as LiteLLM counts them for this model (its tokenizer when it knows
        one, else tiktoken's); a little over a provider's own count, since each is counted as a
        request of its own."""
        return tokens.message_tokens(self.config.model, json.dumps(message, sort_keys=True, default=str))

    def count_tools(self, tools: list[dict[str, Any]]) -> int:
        return tokens.tools_tokens(self.config.model, json.dumps(tools, sort_keys=True, default=str))

    def fitter(self, summarizer: Summarizer | None = None) -> Fitter:
        """What fits requests to this model's context (see agent.context)."""
        return Fitter(self.budget, self.count_message, self.count_tools, summarizer)

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(self.config.extra)
        # Usage arrives only when asked for. LiteLLM drops the option for providers that do not
        # take it (drop_params) and still reports their usage in a last chunk.
        kwargs.setdefault("stream_options", {"include_usage": True})
        if self._server_key() in _NO_STREAM_OPTIONS:
            kwargs.pop("stream_options", None)
        if self.cache_markers:
            messages = tokens.with_cache_markers(messages)
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
            # Whether the provider took the request: a call is charged from then on, even when
            # it is stopped before the first chunk (the provider is reading the prompt).
            self._received.accepted = False
            try:
                self.requests += 1
                response, iterator = await self._start(kwargs)
                self._received.accepted = True
                first = await iterator.__anext__()
                return response, _chain(first, iterator)
            except StopAsyncIteration:
                return response, _empty()
            except RETRYABLE_ERRORS as exc:
                # A provider's error answer costs nothing; only the attempt that streams is paid.
                self._received.accepted = False
                await _close(response)
                attempt += 1
                delay = self._delay(exc, attempt)
                if attempt > self.config.retries or delay is None:
                    kind, message = describe_error(exc)
                    raise ProviderError(message, kind=kind, retryable=True) from exc
                metrics.PROVIDER_RETRIES.inc()
                await asyncio.sleep(delay)
            except ABORT_ERRORS as exc:
                self._received.accepted = False
                await _close(response)
                if "stream_options" in kwargs and rejects_stream_options(exc):
                    # An OpenAI-compatible server that does not know the option: ask without it
                    # (the answer then simply carries no usage). Not a retry: nothing was served.
                    _NO_STREAM_OPTIONS.add(self._server_key())
                    kwargs.pop("stream_options")
                    continue
                kind, message = describe_error(exc)
                raise ProviderError(message, kind=kind) from exc
            except Exception as exc:  # an unknown provider failure must still end as a clear error
                self._received.accepted = False
                await _close(response)
                kind, message = describe_error(exc)
                raise ProviderError(message, kind=kind) from exc

    async def _start(self, kwargs: dict[str, Any]) -> tuple[Any, AsyncIterator[Any]]:
        """Sends one request; returns what to close and the chunks."""
        if self.route is not None:
            return await openai_stream.open_stream(self.route, kwargs)
        response = await self._completion(**kwargs)
        if response is None:
            # LiteLLM answers None, instead of raising, for some rejected requests (a 422 it
            # retried once without parameters it guessed were unsupported).
            raise litellm.exceptions.BadRequestError(
                message="The request was rejected.", model=self.config.model, llm_provider=""
            )
        if isinstance(response, CustomStreamWrapper):
            # LiteLLM keeps every chunk to rebuild the whole response when the stream ends
            # (`stream_chunk_builder`, ~24 ms of CPU for a 400-chunk answer), only to report
            # usage. Tessera has the answer already: keep just the chunks that carry usage, and
            # the rebuild has next to nothing to do.
            response.chunks = _UsageChunks()
        return response, response.__aiter__()

    def _delay(self, exc: BaseException, attempt: int) -> float | None:
        """Seconds to wait before attempt `attempt` + 1, or None when the provider asks for
        longer than `max_wait_s`."""
        retry_after = retry_after_seconds(exc)
        if retry_after is not None and retry_after > self.config.max_wait_s:
            return None
        backoff = self.config.backoff_s * (2.0 ** (attempt - 1))
        return min(max(backoff, retry_after or 0.0), self.config.max_wait_s)

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> AsyncIterator[StreamEvent]:
        """Yields TextDelta/ToolCallOpened events, then one Completed.

        `self.partial` is what has arrived so far, so a caller that stops iterating
        (Stop) or sees a ProviderError mid-stream can keep the partial answer, and its usage is
        what the call cost up to there (see `received`): settle a call cut short with it.
        """
        self._received = received = Received(self.config.model, messages, tools)
        span = spans.ModelCall(
            model=self.config.model,
            provider=self.provider,
            messages=messages,
            tools=tools,
            content=self.config.trace_content,
            server=_host(self.config.api_base),
        )
        requests_before = self.requests
        arguments_sent: dict[int, float] = {}
        try:
            response, chunks = await self._open(messages, tools)
        except ProviderError as exc:
            metrics.PROVIDER_ERRORS.labels(exc.kind).inc()
            span.failed(exc.kind, str(exc), self.requests - requests_before)
            raise
        except BaseException:
            span.ended()
            raise
        try:
            async for chunk in chunks:
                usage = get_field(chunk, "usage")
                if usage:
                    received.reported = True
                    # The last report wins: some providers send running totals, and the final
                    # `choices: []` chunk carries the whole call's usage.
                    received.usage = Usage(
                        prompt_tokens=_count(get_field(usage, "prompt_tokens")),
                        completion_tokens=_count(get_field(usage, "completion_tokens")),
                        cached_tokens=_cached(usage),
                    )
                choices = get_field(chunk, "choices")
                if not choices:
                    continue
                choice = choices[0]
                delta = get_field(choice, "delta")
                finish_reason = normalize_finish_reason(get_field(choice, "finish_reason"))
                if finish_reason:
                    received.finish_reason = finish_reason
                if delta is None:
                    continue
                # Reasoning ("thinking") streams beside the answer on some providers; it is
                # kept apart and never becomes answer text.
                thought = get_field(delta, "reasoning_content")
                if isinstance(thought, str) and thought:
                    received.reasoning.append(thought)
                content = get_field(delta, "content")
                if isinstance(content, str) and content:
                    received.text.append(content)
                    yield TextDelta(content)
                tool_deltas = get_field(delta, "tool_calls")
                if tool_deltas:
                    received.fragments += 1
                    for position, call_id, name in received.calls.add(list(tool_deltas)):
                        yield ToolCallOpened(position, call_id, name)
                    # The arguments so far, at most every ARGUMENTS_INTERVAL_S a call (joined
                    # when sent, not per chunk), for a host that shows them as they come.
                    now = time.monotonic()
                    for position in sorted(received.calls.grown):
                        if now - arguments_sent.get(position, 0.0) >= ARGUMENTS_INTERVAL_S:
                            arguments_sent[position] = now
                            yield ToolArguments(position, received.calls.arguments_so_far(position))
        except Exception as exc:
            kind, message = describe_error(exc)
            metrics.PROVIDER_ERRORS.labels(kind).inc()
            span.failed(kind, message, self.requests - requests_before)
            raise ProviderError(f"{message} The answer was cut off.", kind=kind) from exc
        except BaseException:
            # Left before the end: Stop closed the stream, or its task was cancelled.
            span.ended()
            raise
        finally:
            await _close(response)
        # Drive the loop from the calls actually received, not from finish_reason: several
        # providers report "stop" on a response that carries tool calls.
        answer = received.finish()
        span.finished(
            text=answer.content,
            tool_calls=answer.tool_calls,
            finish_reason=answer.finish_reason,
            input_tokens=answer.usage.prompt_tokens,
            output_tokens=answer.usage.completion_tokens,
            cached_tokens=answer.usage.cached_tokens,
            requests=self.requests - requests_before,
        )
        yield Completed(answer)

    @property
    def partial(self) -> AssistantMessage:
        """What the current stream has delivered so far (assembled when asked, not per chunk:
        joining the text on every chunk made an answer cost O(n²)), with what the call has cost
        up to there as its usage."""
        message = self._received.message()
        message.usage = self._received.spent()
        return message


class _UsageChunks(list[Any]):
    """A LiteLLM stream wrapper's chunk list that keeps only the chunks carrying usage."""

    def append(self, item: Any) -> None:
        if get_field(item, "usage") is not None:
            super().append(item)


@functools.lru_cache(maxsize=256)
def _provider(model: str, api_base: str | None) -> str:
    """The provider's name for spans (`gen_ai.system`), as LiteLLM resolves the model: once per
    model and address in a process, as `openai_stream.resolve` does."""
    try:
        return str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception:  # an unknown model still gets a span, named by its prefix
        return model.split("/", 1)[0] if "/" in model else "unknown"


def _host(api_base: str | None) -> str:
    if not api_base:
        return ""
    from urllib.parse import urlsplit

    try:
        return urlsplit(api_base).hostname or ""
    except ValueError:
        return ""


def _cached(usage: Any) -> int:
    """Prompt tokens read from the provider's cache: OpenAI's `prompt_tokens_details`, which
    LiteLLM fills for other providers too, else Anthropic's own `cache_read_input_tokens`."""
    details = get_field(usage, "prompt_tokens_details")
    cached = _count(get_field(details, "cached_tokens")) if details else 0
    return cached or _count(get_field(usage, "cache_read_input_tokens"))


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
