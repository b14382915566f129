"""The one executor every tool call goes through, from the agent loop and from the HTTP API.

It validates arguments against the tool's schema (toolsets.arguments), runs the tool with its
timeout, classifying failures into a small set of error types and retrying transient failures of
side-effect-free tools (toolsets.running), and records a ToolExecution for every call.

Tool policy applies here too, for every caller (toolsets.policy.gate decides): a "deny" tool
fails, an "ask" tool waits for the caller's approver (the chat's approval card) or fails without
one, a tool whose circuit breaker is open fails at once, and a cacheable call may reuse a stored
result.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from core import crypto, metrics
from core.redact import redact, redact_data

from .arguments import parse, validation_errors
from .availability import Availability
from .base import Tool, ToolContext, Toolset
from .errors import ERROR_TYPES, ErrorType, ToolError
from .models import ToolExecution
from .policy import approval as approvals
from .policy import breaker as breakers
from .policy import cache as results_cache
from .policy import gate as gates
from .registry import resolve
from .running import Progress, run
from .sources import Source, SourceBook

log = logging.getLogger(__name__)

__all__ = ["ERROR_TYPES", "ErrorType", "Execution", "ToolError", "execute"]


@dataclass
class Execution:
    tool_call_id: str
    toolset: Toolset | None
    tool: Tool | None
    arguments: dict[str, Any]
    result: Any = None
    error: ToolError | None = None
    duration_ms: int = 0
    record_id: int | None = None
    availability: Availability | None = None
    sources: list[Source] = field(default_factory=list)
    policy: str = ""
    approval: str = ""  # how an "ask" was settled (toolsets.policy.approval outcomes)
    cached_at: datetime | None = None  # a cache hit: when the call that produced it ran
    breaker: str = ""  # the tool's circuit breaker as the call found it: closed, half_open, open

    @property
    def ok(self) -> bool:
        return self.error is None

    def model_content(self, limit: int) -> str:
        """The text the model reads: the JSON result (truncated past `limit`) or `Error: …`."""
        if self.error is not None:
            text = f"Error ({self.error.type}): {self.error.message}"
            if self.error.details:
                text += "\n" + "\n".join(f"- {detail}" for detail in self.error.details)
            return text
        result = self.result
        if self.sources:
            # The numbers the model cites the result's sources by travel with the result.
            cite = [{"n": s["n"], "title": s["title"], "url": s["url"] or s["kind"]} for s in self.sources]
            result = {**result, "sources": cite} if isinstance(result, dict) else {"result": result, "sources": cite}
        if self.tool is not None and self.tool.model_text is not None:
            text = self.tool.model_text(self.result)
        else:
            text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        if len(text) > limit:
            return (
                text[:limit]
                + f"\n[Truncated: the result was {len(text)} characters; only the first {limit} are shown.]"
            )
        return text


def _traced(function: Callable[..., Awaitable[Execution]]) -> Callable[..., Awaitable[Execution]]:
    """An `execute_tool <name>` span around each call (current while it runs, so an MCP
    request or a subagent's run nests under it), with what the executor decided: toolset,
    policy, approval, cache hit, breaker state and outcome."""

    @functools.wraps(function)
    async def traced(name: str, *args: Any, **kwargs: Any) -> Execution:
        tracer = trace.get_tracer("tessera")
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name[:200],
            "gen_ai.tool.call.id": str(kwargs.get("tool_call_id", ""))[:200],
        }
        with tracer.start_as_current_span(f"execute_tool {name[:200]}", attributes=attributes) as span:
            execution = await function(name, *args, **kwargs)
            if span.is_recording():
                outcome = execution.error.type if execution.error is not None else "success"
                span.set_attributes(
                    {
                        "gen_ai.tool.type": "function",
                        "tessera.toolset": execution.toolset.id if execution.toolset is not None else "",
                        "tessera.tool.policy": execution.policy,
                        "tessera.tool.approval": execution.approval,
                        "tessera.tool.cache_hit": execution.cached_at is not None,
                        "tessera.tool.breaker": execution.breaker,
                        "tessera.tool.outcome": outcome,
                        "tessera.tool.duration_ms": execution.duration_ms,
                    }
                )
                if execution.error is not None:
                    span.set_attribute("error.type", outcome)
                    span.set_status(Status(StatusCode.ERROR, outcome))
            return execution

    return traced


@_traced
async def execute(
    name: str,
    raw_arguments: str | dict[str, Any],
    *,
    user_id: int,
    tool_call_id: str,
    turn_id: int | None = None,
    step: int | None = None,
    position: int | None = None,
    lane: str = "",
    sources: SourceBook | None = None,
    context: ToolContext | None = None,
    progress: Progress | None = None,
    partial: Callable[[Any], None] | None = None,
    chat_id: int | None = None,
    approve: approvals.Approver | None = None,
    elicit: Callable[[Any], Awaitable[Any]] | None = None,
    pre_approved: bool = False,
    offered: Collection[str] | None = None,
    offered_in: str = "offered here",
    client: str = "",
    scope: dict[str, Any] | None = None,
) -> Execution:
    """Runs one call. `approve` is asked about "ask" tools (None: they fail with
    permission_denied, unless `pre_approved` — the API's explicit approval). `elicit` answers
    a tool's questions to the user while it runs (`ToolContext.elicit`).

    `offered`: the names the model was offered in this request (a chat's selection, a subagent's
    own tools). A call naming anything else is refused and recorded, whatever the model was told
    to call by a fetched page, a file or another tool's result; None means every tool (the API)."""
    found = resolve(name)
    toolset, tool_ = found if found else (None, None)
    not_offered = offered is not None and name not in offered
    arguments, parse_error = parse(raw_arguments)
    execution = Execution(tool_call_id, toolset, tool_, arguments)
    toolset_id, tool_name = (toolset.id, tool_.name) if toolset and tool_ else _split_for_record(name)
    details = validation_errors(tool_, arguments) if tool_ is not None and not parse_error and not not_offered else []
    record, gate = await _open(
        user_id=user_id,
        # A call that was not offered is not looked at further: no policy, rate limit, cache or
        # breaker of a tool this conversation does not use is touched.
        toolset=None if not_offered else toolset,
        tool=None if not_offered else tool_,
        chat_id=chat_id,
        arguments=arguments,
        valid=not parse_error and not details,
        asks=approve is not None or pre_approved,
        fields={
            "user_id": user_id,
            "turn_id": turn_id,
            "step": step,
            "position": position,
            "lane": lane,
            "tool_call_id": tool_call_id,
            "client": client[:200],
            "app_sha256": str((tool_.app or {}).get("sha256") or "")[:64] if tool_ is not None else "",
            "toolset": toolset_id,
            "tool": tool_name,
            # PostgreSQL cannot store NUL characters (text or jsonb): the record keeps them escaped.
            "arguments": _storable(arguments),
            "raw_arguments": (raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments)).replace(
                "\x00", "\\u0000"
            ),
        },
    )
    execution.record_id = record.pk
    execution.availability = gate.availability
    execution.policy = gate.policy
    execution.approval = gate.approval
    started = time.monotonic()
    attempts = 0
    if tool_ is None:
        execution.error = ToolError("unknown_tool", f"There is no tool named {name!r}.")
    elif not_offered and toolset is not None:
        execution.error = ToolError(
            "permission_denied",
            f"{toolset.label}: {tool_.display_name} is not among the tools {offered_in}, so it was not run.",
        )
    elif gate.error is not None:
        execution.error = gate.error
    elif parse_error:
        execution.error = ToolError("validation_error", parse_error)
    elif details:
        execution.error = ToolError(
            "validation_error", "The arguments do not match the tool's schema.", details=details
        )
    elif gate.hit is not None:
        # Stored redacted; a secret registered since then goes too.
        execution.result, execution.cached_at = await _redacted(gate.hit.result), gate.hit.at
    try:
        if execution.error is None and execution.cached_at is None and tool_ is not None and toolset is not None:
            if gate.needs_approval:
                execution.approval, execution.error = await gates.ask(
                    approve, pre_approved, toolset, tool_, arguments, gate
                )
                if execution.error is None:
                    # Claimed only now: a probe must not wait on a person for minutes.
                    gate.probes, execution.error = await gates.claim_breaker(gate.scopes, tool_)
                    started = time.monotonic()
            if execution.error is None:
                attempts, result, execution.error = await run(
                    tool_, user_id, turn_id, chat_id, gate, context, progress, elicit, partial, scope
                )
                # Secrets never leave in a result: not to the card, the model, the database,
                # the cache or a log (a server echoing its environment, a page quoting a key).
                execution.result = await _redacted(result)
    except BaseException as exc:
        # Stop while waiting or running: a probe that never reported frees its lease at once.
        if gate.probes:
            breakers.Breakers().release(gate.probes)
        if isinstance(exc, asyncio.CancelledError):
            # The audit says how it ended (Stop in the chat, an MCP client's cancellation).
            await asyncio.shield(_cancel_record(record, execution.approval, int((time.monotonic() - started) * 1000)))
        raise
    execution.duration_ms = int((time.monotonic() - started) * 1000)
    if tool_ is not None and not not_offered:
        circuit_open = execution.error is not None and execution.error.type == "circuit_open"
        execution.breaker = "open" if circuit_open else "half_open" if gate.probes else "closed"
    # A name the model made up is "unknown": labels stay a bounded set, and the log no place for
    # whatever the model wrote.
    known = (toolset_id, tool_name) if tool_ is not None else ("", "unknown")
    ended = execution.error.type if execution.error is not None else "success"
    metrics.tool_executed(*known, "success" if execution.error is None else "error", execution.duration_ms / 1000)
    log.info("Tool %s.%s: %s in %d ms", *known, ended, execution.duration_ms)
    if execution.error is None and tool_ is not None and tool_.sources is not None and sources is not None:
        try:
            execution.sources = sources.add(tool_.sources(execution.result))
        except Exception:  # a result the extractor did not expect costs its citations, nothing else
            log.warning("Reading sources of %s failed", name, exc_info=True)
    await _finish_record(record, execution, attempts, gate)
    return execution


def _split_for_record(name: str) -> tuple[str, str]:
    parts = name.split("__")
    if len(parts) == 3:
        return parts[1][:100], parts[2][:100]
    return "", name[:100]


async def _redacted(result: Any) -> Any:
    if result is None or isinstance(result, bool | int | float):
        return result
    if isinstance(result, str) and len(result) < 2_000:
        return redact(result)
    # A large result takes a few milliseconds to scan: off the loop that streams every turn.
    return await asyncio.to_thread(redact_data, result)


@functools.partial(database_sync_to_async, thread_sensitive=False)
def _open(*, fields: dict[str, Any], **checks: Any) -> tuple[ToolExecution, gates.Gate]:
    """Records the call and decides whether it may run (`gates.decide(**checks)`: availability,
    rate limit, policy, cache, circuit breaker) in one thread hop."""
    # Every stored secret is known here before a result can carry one (a cheap check, most calls).
    crypto.register_stored_secrets()
    gate = gates.decide(**checks)
    fields["policy"] = gate.policy
    return ToolExecution.objects.create(**fields), gate


@functools.partial(database_sync_to_async, thread_sensitive=False)
def _cancel_record(record: ToolExecution, approval: str, duration_ms: int) -> None:
    ToolExecution.objects.filter(pk=record.pk, status=ToolExecution.Status.RUNNING).update(
        status=ToolExecution.Status.CANCELLED,
        finished_at=timezone.now(),
        duration_ms=duration_ms,
        approval=approval,
        error="Cancelled before it finished.",
        error_type="cancelled",
    )


@functools.partial(database_sync_to_async, thread_sensitive=False)
def _finish_record(record: ToolExecution, execution: Execution, attempts: int, gate: gates.Gate) -> None:
    from core.redis_client import sync_client

    record.finished_at = timezone.now()
    record.duration_ms = execution.duration_ms
    record.attempts = attempts
    record.approval = execution.approval
    if execution.error is None:
        record.status = ToolExecution.Status.SUCCESS
        record.result = _jsonable(execution.result)
        record.sources = list(execution.sources)
    else:
        record.status = ToolExecution.Status.ERROR
        record.error = execution.error.full_message.replace("\x00", "\\u0000")
        record.error_type = execution.error.type
    if execution.cached_at is not None:
        record.cache_hit, record.cached_at = True, execution.cached_at
    record.save(
        update_fields=[
            "finished_at",
            "duration_ms",
            "attempts",
            "status",
            "result",
            "error",
            "error_type",
            "sources",
            "approval",
            "cache_hit",
            "cached_at",
        ]
    )
    if attempts and gate.scopes:
        # Only calls that ran count; a failure that was not the tool's fault still settles a probe.
        fault = execution.error is not None and execution.error.fault
        try:
            breakers.Breakers().record(gate.scopes, ok=not fault, probes=gate.probes)
        except Exception:  # the breaker is advice: a Redis hiccup must not fail the call
            log.warning("Recording a call in the circuit breaker failed", exc_info=True)
    if execution.error is None and attempts and gate.cache_key:
        try:
            results_cache.put(
                sync_client(),
                gate.cache_key,
                record.result,
                ttl_s=gate.cache_ttl_s,
                execution_id=record.pk,
                at=record.started_at,
            )
        except Exception:
            log.warning("Storing a result in the cache failed", exc_info=True)


def _storable(value: Any) -> Any:
    """JSON data without NUL characters, which PostgreSQL refuses."""
    text = json.dumps(value, default=str)
    return json.loads(text.replace("\\u0000", "\\\\u0000")) if "\\u0000" in text else value


def _jsonable(value: Any) -> Any:
    # Strict JSON: PostgreSQL's jsonb rejects NaN/Infinity, which json.dumps emits by default.
    return _storable(json.loads(json.dumps(value, default=str), parse_constant=str))
