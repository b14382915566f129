"""LiteLLM custom provider for Tessera's offline demo model.

The reply itself is decided by ``planner.plan_reply``; this module only turns a plan
into LiteLLM responses and streams, paced like a real model so the UI, the stop
button and reconnects can be exercised without a network or an API key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from litellm import CustomLLM
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, HTTPHandler
from litellm.llms.custom_llm import CustomLLMError
from litellm.types.utils import EmbeddingResponse, GenericStreamingChunk, Message, ModelResponse, Usage

from . import embedding as demo_embedding
from .planner import Plan, plan_reply

logger = logging.getLogger(__name__)

DEFAULT_TOKENS_PER_SECOND = 40.0
TOKENS_PER_SECOND_ENV = "TESSERA_DEMO_TOKENS_PER_SECOND"
# Real providers take a moment before the first token; a UI that only works when the
# first token is instant would break on them.
TIME_TO_FIRST_TOKEN = 0.1
# How many pieces of text "[demo:fail-mid]" gets out before the simulated failure.
MID_STREAM_FAILURE_AFTER = 8

_TEXT_PIECE_RE = re.compile(r"\S+\s*|\s+")
# JSON arguments are cut into short word and punctuation runs, the way real models
# stream them, so consumers must join fragments rather than expect whole values.
_ARGUMENT_PIECE_RE = re.compile(r"\w{1,6}|\W{1,3}")
_LONG_WORD = 8
_WORD_PIECE = 6
_COMPONENT_OPEN_RE = re.compile(r"^:::component\{[^}\n]*\}[ \t]*\n", re.MULTILINE)
_JSON_PIECE_RE = re.compile(r"[^,\s]+[,\s]*|[,\s]+")
_JSON_PIECE = 16


def _word_pieces(text: str) -> list[str]:
    pieces: list[str] = []
    for match in _TEXT_PIECE_RE.finditer(text):
        piece = match.group()
        word = piece.rstrip()
        if len(word) <= _LONG_WORD:
            pieces.append(piece)
            continue
        parts = [word[i : i + _WORD_PIECE] for i in range(0, len(word), _WORD_PIECE)]
        parts[-1] += piece[len(word) :]
        pieces.extend(parts)
    return pieces


def _json_pieces(line: str) -> list[str]:
    # Field-sized pieces ('"status":"TODO",'): still many of them, so the UI sees the
    # block open for a while, without a long table taking half a minute at 40 per second.
    pieces: list[str] = []
    for match in _JSON_PIECE_RE.finditer(line):
        piece = match.group()
        pieces.extend(piece[i : i + _JSON_PIECE] for i in range(0, len(piece), _JSON_PIECE))
    return pieces


def text_pieces(text: str) -> list[str]:
    """Split text into token-like pieces: a word (or part of a long word) with its trailing space.

    The JSON line of a ``:::component{type="..."}`` block is cut into field-sized pieces instead.
    """
    pieces: list[str] = []
    position = 0
    for opening in _COMPONENT_OPEN_RE.finditer(text):
        if opening.start() < position:
            continue
        end = text.find("\n", opening.end())
        end = len(text) if end == -1 else end + 1
        pieces += _word_pieces(text[position : opening.end()])
        pieces += _json_pieces(text[opening.end() : end])
        position = end
    pieces += _word_pieces(text[position:])
    return pieces


def argument_pieces(arguments: str) -> list[str]:
    return _ARGUMENT_PIECE_RE.findall(arguments)


def _parse_rate(value: Any, source: str) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a number, got {value!r}") from None
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"{source} must be a finite number >= 0, got {value!r}")
    return rate


def resolve_tokens_per_second(per_call: Any = None) -> float:
    """Per-call value first, then the environment, then the default; 0 means no delay at all."""
    if per_call is not None:
        try:
            return _parse_rate(per_call, "tokens_per_second")
        except ValueError as error:
            # A 400 makes LiteLLM raise BadRequestError, which is what a caller's typo deserves.
            raise CustomLLMError(status_code=400, message=str(error)) from None
    env_value = os.environ.get(TOKENS_PER_SECOND_ENV)
    if env_value:
        try:
            return _parse_rate(env_value, TOKENS_PER_SECOND_ENV)
        except ValueError as error:
            # A typo in the environment should not take the demo down for every user.
            logger.warning("%s; using %s", error, DEFAULT_TOKENS_PER_SECOND)
    return DEFAULT_TOKENS_PER_SECOND


@dataclass(frozen=True)
class Pacing:
    tokens_per_second: float

    @property
    def first_delay(self) -> float:
        return TIME_TO_FIRST_TOKEN if self.tokens_per_second > 0 else 0.0

    @property
    def interval(self) -> float:
        return 1.0 / self.tokens_per_second if self.tokens_per_second > 0 else 0.0

    def total(self, pieces: int) -> float:
        return self.first_delay + self.interval * max(pieces - 1, 0)


def _fail_before_error() -> CustomLLMError:
    # A 503 from a custom handler is mapped by LiteLLM to its ServiceUnavailableError.
    return CustomLLMError(
        status_code=503,
        message="Tessera demo model: simulated outage before the first token ([demo:fail-before])",
    )


def _fail_mid_error() -> CustomLLMError:
    return CustomLLMError(
        status_code=500,
        message="Tessera demo model: simulated failure in the middle of the answer ([demo:fail-mid])",
    )


def _estimate_tokens(value: Any) -> int:
    # About four characters per token is close enough for a demo's usage numbers.
    return max(1, len(json.dumps(value, ensure_ascii=False, default=str)) // 4)


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _chunk(text: str = "", tool_use: dict[str, Any] | None = None) -> GenericStreamingChunk:
    return {
        "text": text,
        "tool_use": tool_use,  # type: ignore[typeddict-item]
        "is_finished": False,
        "finish_reason": "",
        "usage": None,
        "index": 0,
    }


# A step is the pause before it and what to send then; an exception is raised instead of sent.
Step = tuple[float, GenericStreamingChunk | Exception]


def stream_steps(plan: Plan, pacing: Pacing, prompt_tokens: int) -> Iterator[Step]:
    """The timed sequence of stream chunks for a plan, shared by the sync and async streams."""
    sent = 0

    def delay() -> float:
        return pacing.first_delay if sent == 0 else pacing.interval

    for index, call in enumerate(plan.tool_calls):
        header = {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
            "index": index,
        }
        yield delay(), _chunk(tool_use=header)
        sent += 1
        for piece in argument_pieces(call.arguments):
            fragment = {
                "id": None,
                "type": "function",
                "function": {"name": None, "arguments": piece},
                "index": index,
            }
            yield delay(), _chunk(tool_use=fragment)
            sent += 1
    for piece in text_pieces(plan.text):
        if plan.fail == "mid" and sent >= MID_STREAM_FAILURE_AFTER:
            break
        yield delay(), _chunk(text=piece)
        sent += 1
    if plan.fail == "mid":
        yield delay(), _fail_mid_error()
        return
    final = _chunk()
    final["is_finished"] = True
    final["finish_reason"] = "tool_calls" if plan.tool_calls else "stop"
    final["usage"] = _usage(prompt_tokens, sent)  # type: ignore[typeddict-item]
    yield 0.0, final


def completion_tokens(plan: Plan) -> int:
    call_pieces = sum(1 + len(argument_pieces(call.arguments)) for call in plan.tool_calls)
    return call_pieces + len(text_pieces(plan.text))


class DemoLLM(CustomLLM):
    """Deterministic, offline chat model reachable as ``demo/<anything>`` once registered."""

    def _prepare(self, messages: Sequence[Any], optional_params: dict[str, Any]) -> tuple[Plan, Pacing, int]:
        pacing = Pacing(resolve_tokens_per_second(optional_params.get("tokens_per_second")))
        plan = plan_reply(messages, optional_params.get("tools"), optional_params.get("tool_choice"))
        if plan.fail == "before":
            # Raised from the call itself, before any stream exists: like a provider answering 503.
            raise _fail_before_error()
        prompt_tokens = _estimate_tokens(list(messages)) + _estimate_tokens(optional_params.get("tools") or [])
        return plan, pacing, prompt_tokens

    @staticmethod
    def _fill_response(model_response: ModelResponse, plan: Plan, prompt_tokens: int) -> ModelResponse:
        choice = model_response.choices[0]
        if plan.tool_calls:
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in plan.tool_calls
            ]
            choice.message = Message(content=None, tool_calls=calls)
            choice.finish_reason = "tool_calls"
        else:
            choice.message = Message(content=plan.text)
            choice.finish_reason = "stop"
        generated = completion_tokens(plan)
        model_response.usage = Usage(  # type: ignore[attr-defined]
            prompt_tokens=prompt_tokens,
            completion_tokens=generated,
            total_tokens=prompt_tokens + generated,
        )
        return model_response

    def _non_streaming_wait(self, plan: Plan, pacing: Pacing) -> tuple[float, bool]:
        """How long a whole reply takes to generate, and whether it then fails."""
        if plan.fail == "mid":
            return pacing.total(MID_STREAM_FAILURE_AFTER), True
        return pacing.total(completion_tokens(plan)), False

    def completion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: dict | None = None,
        timeout: float | httpx.Timeout | None = None,
        client: HTTPHandler | None = None,
    ) -> ModelResponse:
        plan, pacing, prompt_tokens = self._prepare(messages, optional_params)
        wait, fails = self._non_streaming_wait(plan, pacing)
        time.sleep(wait)
        if fails:
            raise _fail_mid_error()
        return self._fill_response(model_response, plan, prompt_tokens)

    async def acompletion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: dict | None = None,
        # Part of LiteLLM's handler signature; the demo never waits on I/O to time out.
        timeout: float | httpx.Timeout | None = None,  # noqa: ASYNC109
        client: AsyncHTTPHandler | None = None,
    ) -> ModelResponse:
        plan, pacing, prompt_tokens = self._prepare(messages, optional_params)
        wait, fails = self._non_streaming_wait(plan, pacing)
        await asyncio.sleep(wait)
        if fails:
            raise _fail_mid_error()
        return self._fill_response(model_response, plan, prompt_tokens)

    def embedding(
        self, model: str, input: list, model_response: EmbeddingResponse, *_: Any, **__: Any
    ) -> EmbeddingResponse:
        """`demo/embed`: deterministic vectors with a little meaning (demo.embedding)."""
        texts = [str(item) for item in input]
        model_response.data = [  # type: ignore[assignment]
            {"object": "embedding", "index": n, "embedding": demo_embedding.vector(text)}
            for n, text in enumerate(texts)
        ]
        model_response.model = model
        tokens = sum(len(text.split()) for text in texts)
        model_response.usage = Usage(prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens)  # type: ignore[attr-defined]
        return model_response

    async def aembedding(  # type: ignore[override]
        self,
        model: str,
        input: list,
        model_response: EmbeddingResponse,
        *args: Any,
        **kwargs: Any,
    ) -> EmbeddingResponse:
        return self.embedding(model, input, model_response, *args, **kwargs)

    # The streaming methods are plain functions returning an iterator (not generator
    # functions) so that planning, argument validation and "[demo:fail-before]" raise
    # while LiteLLM is still inside completion(), i.e. from the call, as a real
    # provider's HTTP error would, instead of from the first read of the stream.
    # The base class types astreaming as a coroutine; LiteLLM only ever iterates
    # what it returns, hence the override ignore.

    def streaming(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: dict | None = None,
        timeout: float | httpx.Timeout | None = None,
        client: HTTPHandler | None = None,
    ) -> Iterator[GenericStreamingChunk]:
        plan, pacing, prompt_tokens = self._prepare(messages, optional_params)
        return _sync_stream(stream_steps(plan, pacing, prompt_tokens))

    def astreaming(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: dict | None = None,
        timeout: float | httpx.Timeout | None = None,
        client: AsyncHTTPHandler | None = None,
    ) -> AsyncIterator[GenericStreamingChunk]:
        plan, pacing, prompt_tokens = self._prepare(messages, optional_params)
        return _async_stream(stream_steps(plan, pacing, prompt_tokens))


def _sync_stream(steps: Iterator[Step]) -> Iterator[GenericStreamingChunk]:
    for pause, item in steps:
        if pause:
            time.sleep(pause)
        if isinstance(item, Exception):
            raise item
        yield item


async def _async_stream(steps: Iterator[Step]) -> AsyncIterator[GenericStreamingChunk]:
    # asyncio.sleep, never time.sleep: many turns share one event loop.
    for pause, item in steps:
        if pause:
            await asyncio.sleep(pause)
        if isinstance(item, Exception):
            raise item
        yield item
