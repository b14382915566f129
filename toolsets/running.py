"""Running one tool call once it may run: its context, the timeout, retries of transient failures
of side-effect-free tools, and every failure classified into a ToolError."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async

from core.redact import redact, redact_data

from .base import Tool, ToolContext, ToolFailure
from .errors import BACKOFF_S, MAX_ATTEMPTS, ToolError
from .policy import gate as gates

Progress = Callable[[str, float | None], None]


async def run(
    tool_: Tool,
    user_id: int,
    turn_id: int | None,
    chat_id: int | None,
    gate: gates.Gate,
    context: ToolContext | None,
    progress: Progress | None,
    elicit: Callable[[Any], Awaitable[Any]] | None = None,
    partial: Callable[[Any], None] | None = None,
    scope: dict[str, Any] | None = None,
) -> tuple[int, Any, ToolError | None]:
    """Calls the tool, retrying transient failures: (attempts, result, error)."""
    available = gate.availability
    ctx = context or ToolContext(
        user_id=user_id,
        turn_id=turn_id,
        chat_id=chat_id,
        api_key=available.api_key if available else "",
        settings=dict(available.settings) if available else {},
        scope=dict(scope or {}),
    )
    if progress is not None:
        report = progress

        def redacted_progress(text: str, percent: float | None = None) -> None:
            report(redact(text), percent)

        ctx.progress = redacted_progress
    if partial is not None:
        show = partial

        def redacted_partial(result: Any) -> None:
            show(redact_data(result))

        ctx.partial = redacted_partial
    if elicit is not None:
        ctx.elicit = elicit
    attempts = 0
    while True:
        attempts += 1
        try:
            return attempts, await _call(tool_, ctx, gate.arguments), None
        except Exception as exc:  # every failure becomes a classified result
            error = classify(exc, tool_)
        # Transient failures are retried, but only where running twice is harmless; a rate
        # limit is not transient on the scale of this backoff.
        retry = error.retryable and error.type != "rate_limit_error"
        if not (retry and not tool_.side_effects and attempts < MAX_ATTEMPTS):
            return attempts, None, error
        await asyncio.sleep(BACKOFF_S * 2 ** (attempts - 1))


async def _call(tool_: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
    args = (ctx,) if tool_.wants_context else ()
    if tool_.prepare is not None:
        await tool_.prepare(ctx)
    if tool_.is_async:
        # A timeout the tool can see (and pause while it waits on the person: an MCP question).
        async with asyncio.timeout(tool_.timeout_s) as clock:
            ctx.clock = clock
            return await tool_.func(*args, **arguments)
    # Sync tools run in a thread (with Django's connection upkeep: they may use the ORM); the
    # timeout bounds how long the turn waits for one.
    call = database_sync_to_async(tool_.func, thread_sensitive=False)
    return await asyncio.wait_for(call(*args, **arguments), timeout=tool_.timeout_s)


def classify(exc: BaseException, tool_: Tool) -> ToolError:
    if isinstance(exc, ToolFailure):
        fault = exc.fault
        if fault is None:
            # A timeout, or a transient execution failure (5xx, a lost connection), is the
            # tool's; a refusal of these arguments is not.
            fault = exc.error_type == "timeout_error" or (exc.error_type == "execution_error" and exc.retryable)
        return ToolError(exc.error_type, str(exc), exc.retryable, fault=fault)
    if isinstance(exc, TimeoutError):
        return ToolError(
            "timeout_error", f"The tool did not finish within {tool_.timeout_s:g} seconds.", True, fault=True
        )
    if isinstance(exc, (ValueError, TypeError, LookupError)):
        # How tools say "these arguments make no sense" (no such task, an empty post…).
        return ToolError("execution_error", str(exc) or type(exc).__name__)
    if isinstance(exc, (ConnectionError, OSError)):
        return ToolError("execution_error", f"{type(exc).__name__}: {exc}", True, fault=True)
    return ToolError("execution_error", f"{type(exc).__name__}: {exc}", fault=True)
