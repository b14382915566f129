"""Whether a tool call may run, decided before it does: the toolset's availability for the
user, the rate limit, the tool's policy (deny, ask, or allowed in this chat), a cached result,
and the circuit breaker; then, for an "ask" call, the user's answer, and the breaker's probe
claimed only once the answer is in (a probe must not wait on a person)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from core import ratelimit
from core.redis_client import sync_client

from .. import availability, policy
from ..availability import Availability
from ..base import Tool, Toolset
from ..errors import ToolError, lease_s
from ..models import PolicySettings
from . import approval as approvals
from . import breaker as breakers
from . import cache as results_cache


@dataclass
class Gate:
    """What the checks found for one call."""

    availability: Availability | None = None
    error: ToolError | None = None
    policy: str = ""
    needs_approval: bool = False
    approval_timeout_s: float = 600.0
    hit: results_cache.Hit | None = None
    cache_key: str = ""
    cache_ttl_s: int = 0
    scopes: list[str] = field(default_factory=list)
    probes: tuple[str, ...] = ()
    arguments: dict[str, Any] = field(default_factory=dict)
    approval: str = ""  # an "ask" settled before asking (allowed in this chat)


def decide(
    *,
    user_id: int,
    toolset: Toolset | None,
    tool: Tool | None,
    chat_id: int | None,
    arguments: dict[str, Any],
    valid: bool,
    asks: bool,
) -> Gate:
    """The checks before a call, in the executor's one thread hop (blocking)."""
    gate = Gate(arguments=arguments)
    if tool is not None and toolset is not None:
        resolved = policy.for_tool(user_id, toolset, tool)
        gate.policy = resolved.policy
        gate.availability = availability.for_toolset(user_id, tool.toolset_id)
        available = gate.availability
        if available is not None and not available.usable:
            gate.error = ToolError("permission_denied", f"{available.toolset.name}: {available.reason}.")
        elif tool.held:
            gate.error = ToolError("permission_denied", f"{toolset.label}: {tool.display_name} {tool.held}")
        elif resolved.policy == policy.DENY:
            gate.error = ToolError(
                "permission_denied", f"{toolset.label}: {tool.display_name} is not allowed (its policy is Deny)."
            )
        elif available is not None and not ratelimit.allow(
            tool.rate_limit_key, user_id, available.rate_limit_per_minute, window_s=60, zero_is_unlimited=True
        ):
            gate.error = ToolError(
                "rate_limit_error",
                f"Rate limit reached: at most {available.rate_limit_per_minute} calls a minute to this tool.",
                retryable=True,
            )
        elif valid:
            _decide_run(gate, user_id, resolved, toolset, tool, chat_id, asks, sync_client(), PolicySettings.load())
    return gate


def _decide_run(
    gate: Gate,
    user_id: int,
    resolved: policy.Resolved,
    toolset: Toolset,
    tool: Tool,
    chat_id: int | None,
    asks: bool,
    redis: Any,
    settings: Any,
) -> None:
    """For a call that may run: does it need asking, is there a cached result, is the breaker
    open (claiming the probe now only if nobody has to be asked first)?"""
    allowed = (
        resolved.policy == policy.ASK
        and tool.always_allowable
        and policy.allowed_in_chat(chat_id, toolset.id, tool.name)
    )
    gate.needs_approval = resolved.policy == policy.ASK and not allowed
    gate.approval = approvals.ALLOWED_IN_CHAT if allowed else ""
    gate.approval_timeout_s = float(settings.approval_timeout_s)
    if results_cache.cacheable(tool, enabled=resolved.cache_enabled):
        available = gate.availability
        gate.cache_key = results_cache.key(
            f"{toolset.id}.{tool.name}",
            gate.arguments,
            user_id=user_id,
            api_key=available.api_key if available else "",
            public=tool.cache_public,
        )
        gate.cache_ttl_s = tool.cache_ttl_s
        if not gate.needs_approval:
            gate.hit = results_cache.get(redis, gate.cache_key)
            if gate.hit is not None:
                return
    gate.scopes = breakers.scopes_for(toolset, tool)
    if gate.needs_approval and not asks:
        return  # refused without asking anyway: nothing to look up
    board = breakers.Breakers(redis)
    verdict = board.allow(gate.scopes, lease_s=lease_s(tool), claim=not gate.needs_approval)
    if verdict.allowed:
        gate.probes = verdict.probes
    else:
        gate.needs_approval = False
        gate.error = ToolError("circuit_open", verdict.message(tool.display_name, board.clock()), retryable=True)


async def ask(
    approve: approvals.Approver | None,
    pre_approved: bool,
    toolset: Toolset,
    tool_: Tool,
    arguments: dict[str, Any],
    gate: Gate,
) -> tuple[str, ToolError | None]:
    """Settles an "ask" call: (how it was settled, the error if it may not run)."""
    if pre_approved:
        return approvals.PRE_APPROVED, None
    if approve is None:
        return "", ToolError(
            "permission_denied",
            f"{toolset.label}: {tool_.display_name} needs the user's approval for each call "
            "(its policy is Ask), and this caller cannot ask for it.",
        )
    request = approvals.ApprovalRequest(
        toolset_id=toolset.id,
        tool=tool_.name,
        name=f"toolset__{toolset.id}__{tool_.name}",
        display_name=f"{toolset.label}: {tool_.display_name}",
        arguments=arguments,
        timeout_s=gate.approval_timeout_s,
        always_allowable=tool_.always_allowable,
    )
    decision = await approve(request)
    if decision.approved:
        return decision.outcome or approvals.APPROVED, None
    return decision.outcome or approvals.DENIED, ToolError(
        "permission_denied", decision.error_message(gate.approval_timeout_s)
    )


async def claim_breaker(scopes: list[str], tool_: Tool) -> tuple[tuple[str, ...], ToolError | None]:
    def claim() -> tuple[tuple[str, ...], ToolError | None]:
        board = breakers.Breakers()
        verdict = board.allow(scopes, lease_s=lease_s(tool_))
        if verdict.allowed:
            return verdict.probes, None
        return (), ToolError("circuit_open", verdict.message(tool_.display_name, board.clock()), retryable=True)

    # channels ships no type information: the claim's type is restated here.
    claimed: tuple[tuple[str, ...], ToolError | None] = await database_sync_to_async(claim, thread_sensitive=False)()
    return claimed
