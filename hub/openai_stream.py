"""A completion as server-sent events (`"stream": true`): OpenAI's chunks, the main
conversation's text as it arrives, then the caller's tool calls, the finish reason with
Tessera's extension, the usage when asked for, and `[DONE]`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async

from chat.live import LiveTurn
from chat.models import Turn

from .turns import cancel, result_of, states


def _delta(state: LiveTurn, sent: dict[int, int], order: list[int]) -> str:
    """The main conversation's text that arrived since the last call (`sent`: characters sent
    per step); steps are separated by a blank line, as in the final answer."""
    out: list[str] = []
    for step in state.steps:
        if not step.text:
            continue
        done = sent.get(step.index, 0)
        if done == 0 and order and step.index not in order:
            out.append("\n\n")
        if step.index not in order:
            order.append(step.index)
        if len(step.text) > done:
            out.append(step.text[done:])
            sent[step.index] = len(step.text)
    return "".join(out)


def _chunk(completion_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    payload = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def failure(error_kind: str) -> tuple[int, str]:
    """A failed turn's HTTP status and OpenAI error type: a used-up budget is the caller's quota
    (429 insufficient_quota, as OpenAI answers it: not worth retrying until the reset), a rate
    limit a 429 worth retrying, anything else the provider's failure (502)."""
    if error_kind == "budget":
        return 429, "insufficient_quota"
    if error_kind == "rate_limit":
        return 429, "api_error"
    return 502, "api_error"


async def stream(
    turn: Turn,
    model: str,
    completion_id: str,
    created: int,
    usage: bool,
    base_url: str = "",
    *,
    stop_on_close: bool = True,
) -> AsyncIterator[bytes]:
    yield _chunk(completion_id, created, model, {"role": "assistant", "content": ""}, None)
    sent: dict[int, int] = {}
    order: list[int] = []
    finished = False
    try:
        async for state in states(turn.pk, turn.chat_id):
            text = _delta(state, sent, order)
            if text:
                yield _chunk(completion_id, created, model, {"content": text}, None)
        finished = True
    finally:
        if not finished and stop_on_close:
            # The caller closed the stream and the conversation is in no chat list: nobody will
            # read the rest, so the turn stops as at Stop. A kept one runs on, as a chat does
            # when its page is closed.
            await asyncio.shield(sync_to_async(cancel)(turn.pk))
    result = await sync_to_async(result_of)(turn.pk, None, base_url)
    if result.failed:
        problem = {
            "message": result.error or "The turn failed.",
            "type": failure(result.error_kind)[1],
            "code": result.error_kind,
        }
        yield b"data: " + json.dumps({"error": problem}).encode() + b"\n\n"
        return
    if result.tool_calls:
        calls = [{"index": i, **call} for i, call in enumerate(result.tool_calls)]
        yield _chunk(completion_id, created, model, {"tool_calls": calls}, None)
    last = json.loads(_chunk(completion_id, created, model, {}, result.finish_reason)[6:])
    last["tessera"] = result.extension
    yield b"data: " + json.dumps(last).encode() + b"\n\n"
    if usage:
        tail = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": result.usage,
        }
        yield b"data: " + json.dumps(tail).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"
