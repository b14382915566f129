"""The executor applies tool policy for every caller: deny, ask (with an approver or without),
circuit breakers and the result cache."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings

from chat.models import Chat
from toolsets import availability, registry
from toolsets.base import ToolFailure, Toolset, tool
from toolsets.executor import execute
from toolsets.models import ChatToolAllowance, PolicySettings, ToolExecution, ToolRule
from toolsets.policy import approval, breaker
from toolsets.policy.approval import ApprovalRequest, Decision

pytestmark = pytest.mark.django_db(transaction=True)
runs: list[str] = []


@tool(side_effects=True)
def write(text: Annotated[str, "What to write"]) -> dict[str, str]:
    """Write something."""
    runs.append(f"write:{text}")
    return {"written": text}


@tool(policy="deny")
def forbidden() -> str:
    """Never allowed."""
    runs.append("forbidden")
    return "no"


@tool(cache_ttl_s=60)
def lookup(query: str, limit: int = 3) -> dict[str, Any]:
    """Look something up (cacheable per user)."""
    runs.append(f"lookup:{query}")
    return {"query": query, "n": len(runs)}


@tool(cache_ttl_s=60, cache_public=True)
def public_lookup(query: str) -> dict[str, Any]:
    """Look something up (cacheable for everyone)."""
    runs.append(f"public:{query}")
    return {"query": query}


@tool(cache_ttl_s=60)
def broken(mode: str = "fault") -> str:
    """Fails: with the tool's fault, or because of its arguments."""
    runs.append(f"broken:{mode}")
    if mode == "fault":
        raise ToolFailure("upstream answered 503", fault=True)
    raise ValueError("no such thing")


@pytest.fixture(autouse=True)
def probe(monkeypatch: pytest.MonkeyPatch) -> Toolset:
    runs.clear()
    toolset = Toolset(id="probe", name="Probe", description="", tools=[write, forbidden, lookup, public_lookup, broken])
    toolsets = {**registry.all_toolsets(), "probe": toolset}
    monkeypatch.setattr(registry, "all_toolsets", lambda: toolsets)
    monkeypatch.setattr(availability, "all_toolsets", lambda: toolsets)
    PolicySettings(approval_timeout_s=600, breaker_failures=2, breaker_window_s=60, breaker_cooldown_s=30).save()
    return toolset


def name(tool_name: str) -> str:
    return f"toolset__probe__{tool_name}"


async def run(tool_name: str, arguments: dict[str, Any], user: Any, **kwargs: Any) -> Any:
    return await execute(name(tool_name), arguments, user_id=user.pk, tool_call_id="call_1", **kwargs)


async def record(execution: Any) -> ToolExecution:
    return await ToolExecution.objects.aget(pk=execution.record_id)


def answering(decision: Decision, seen: list[ApprovalRequest]) -> Any:
    async def approve(request: ApprovalRequest) -> Decision:
        seen.append(request)
        return decision

    return approve


async def test_deny_never_runs(user: Any) -> None:
    execution = await run("forbidden", {}, user)
    assert execution.error is not None and execution.error.type == "permission_denied"
    assert "policy is Deny" in execution.error.message
    assert runs == [] and (await record(execution)).policy == "deny"


async def test_ask_without_an_approver_is_refused(user: Any) -> None:
    execution = await run("write", {"text": "hi"}, user)
    assert execution.error is not None and execution.error.type == "permission_denied"
    assert "needs the user's approval" in execution.error.message
    assert runs == []


async def test_ask_approved_runs_and_is_recorded(user: Any) -> None:
    seen: list[ApprovalRequest] = []
    execution = await run("write", {"text": "hi"}, user, approve=answering(Decision(True, outcome="approved"), seen))
    assert execution.error is None and execution.result == {"written": "hi"}
    assert runs == ["write:hi"]
    assert seen[0].display_name == "Probe: Write" and seen[0].arguments == {"text": "hi"}
    assert seen[0].timeout_s == 600
    found = await record(execution)
    assert (found.policy, found.approval, found.status) == ("ask", "approved", "success")


async def test_ask_denied_returns_the_reason_and_does_not_run(user: Any) -> None:
    denial = Decision(False, reason="Not that project", outcome="denied")
    execution = await run("write", {"text": "hi"}, user, approve=answering(denial, []))
    assert execution.error is not None and execution.error.type == "permission_denied"
    assert execution.error.message == "The user denied this call; it did not run. Their reason: Not that project"
    assert "Their reason: Not that project" in execution.model_content(1000)
    assert runs == [] and (await record(execution)).approval == "denied"


async def test_invalid_arguments_are_reported_before_anyone_is_asked(user: Any) -> None:
    seen: list[ApprovalRequest] = []
    execution = await run("write", {"txt": "hi"}, user, approve=answering(Decision(True), seen))
    assert execution.error is not None and execution.error.type == "validation_error"
    assert seen == []


async def test_an_unanswered_request_times_out_as_denied(user: Any) -> None:
    await sync_to_async(PolicySettings(approval_timeout_s=1).save)()
    client = redis.asyncio.from_url(settings.REDIS_URL)

    async def approve(request: ApprovalRequest) -> Decision:
        await approval.open_request(client, request, chat_id=1, turn_id=1, user_id=user.pk)
        return await approval.wait(client, request, poll_s=0.05)

    try:
        execution = await run("write", {"text": "hi"}, user, approve=approve)
    finally:
        await client.aclose()
    assert execution.error is not None and execution.error.type == "permission_denied"
    assert execution.error.message.startswith("Nobody approved this call within 1 s")
    assert runs == [] and (await record(execution)).approval == "timed_out"


async def test_always_allowed_in_this_chat_runs_without_asking(user: Any, demo_model: Any) -> None:
    chat = await Chat.objects.acreate(owner=user, model=demo_model)
    other = await Chat.objects.acreate(owner=user, model=demo_model)
    await ChatToolAllowance.objects.acreate(chat=chat, toolset_id="probe", tool="write")
    seen: list[ApprovalRequest] = []
    approve = answering(Decision(False), seen)
    allowed = await run("write", {"text": "a"}, user, approve=approve, chat_id=chat.pk)
    asked = await run("write", {"text": "b"}, user, approve=approve, chat_id=other.pk)
    assert allowed.error is None and asked.error is not None
    assert len(seen) == 1 and runs == ["write:a"]
    assert (await record(allowed)).approval == "allowed_in_chat"


async def test_the_api_flag_runs_an_ask_tool(user: Any) -> None:
    execution = await run("write", {"text": "api"}, user, pre_approved=True)
    assert execution.error is None and (await record(execution)).approval == "pre_approved"


async def test_breaker_opens_on_the_tools_own_failures_only(user: Any) -> None:
    for _ in range(3):  # arguments the tool refuses are not its fault
        assert (await run("broken", {"mode": "bad"}, user)).error.type == "execution_error"  # type: ignore[union-attr]
    await run("broken", {"mode": "bad-types", "x": 1}, user)  # a validation error: never ran
    first = await run("broken", {}, user)
    assert first.error is not None and first.error.type == "execution_error"
    await run("broken", {}, user)
    runs.clear()
    stopped = await run("broken", {}, user)
    assert stopped.error is not None and stopped.error.type == "circuit_open" and stopped.error.retryable
    assert "temporarily disabled after repeated failures" in stopped.error.message
    assert runs == []  # failed fast
    assert (await record(stopped)).error_type == "circuit_open"
    # Other tools of the toolset are not affected.
    assert (await run("lookup", {"query": "q"}, user)).error is None


async def test_an_ask_tool_with_an_open_breaker_fails_before_asking(user: Any) -> None:
    board = breaker.Breakers()
    for _ in range(2):
        await sync_to_async(board.record)([breaker.tool_scope("probe", "write")], ok=False)
    seen: list[ApprovalRequest] = []
    execution = await run("write", {"text": "x"}, user, approve=answering(Decision(True), seen))
    assert execution.error is not None and execution.error.type == "circuit_open"
    assert seen == [] and runs == []


async def test_an_identical_call_is_served_from_the_cache(user: Any) -> None:
    first = await run("lookup", {"query": "django", "limit": 3}, user)
    second = await run("lookup", {"limit": 3, "query": "django"}, user)
    assert runs == ["lookup:django"]
    assert second.result == first.result and second.cached_at is not None
    original, hit = await record(first), await record(second)
    assert (original.cache_hit, hit.cache_hit) == (False, True)
    assert hit.cached_at == original.started_at and hit.result == original.result
    # Different arguments run the tool.
    await run("lookup", {"query": "django", "limit": 4}, user)
    assert runs == ["lookup:django", "lookup:django"]


async def test_the_cache_is_per_user_unless_public(user: Any, other_user: Any) -> None:
    await run("lookup", {"query": "q"}, user)
    await run("lookup", {"query": "q"}, other_user)
    await run("public_lookup", {"query": "q"}, user)
    shared = await run("public_lookup", {"query": "q"}, other_user)
    assert runs == ["lookup:q", "lookup:q", "public:q"]
    assert shared.cached_at is not None


async def test_errors_are_never_cached(user: Any) -> None:
    await run("broken", {"mode": "bad"}, user)
    again = await run("broken", {"mode": "bad"}, user)
    assert runs == ["broken:bad", "broken:bad"] and again.cached_at is None


async def test_an_admin_can_switch_caching_off_per_tool(user: Any) -> None:
    await ToolRule.objects.acreate(toolset_id="probe", tool="lookup", cache_enabled=False)
    await run("lookup", {"query": "q"}, user)
    await run("lookup", {"query": "q"}, user)
    assert runs == ["lookup:q", "lookup:q"]


async def test_stop_while_waiting_leaves_no_probe_lease(user: Any) -> None:
    board = breaker.Breakers()
    scope = breaker.tool_scope("probe", "write")
    await sync_to_async(PolicySettings(breaker_failures=1, breaker_cooldown_s=1).save)()
    await sync_to_async(board.record)([scope], ok=False)
    await asyncio.sleep(1.1)
    waiting = asyncio.Event()

    async def approve(request: ApprovalRequest) -> Decision:
        waiting.set()
        await asyncio.sleep(60)
        return Decision(True)

    task = asyncio.create_task(run("write", {"text": "x"}, user, approve=approve))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The breaker was only looked at while the user was asked: the next call may still probe.
    assert (await sync_to_async(board.allow)([scope], lease_s=5)).allowed
