from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

import pytest

from toolsets import registry, running
from toolsets.base import ToolContext, ToolFailure, Toolset, tool
from toolsets.errors import MAX_ATTEMPTS
from toolsets.executor import Execution, ToolError, execute
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db(transaction=True)

calls: dict[str, int] = {}


def _count(name: str) -> int:
    calls[name] = calls.get(name, 0) + 1
    return calls[name]


@tool()
def add(a: Annotated[int, "First number"], b: int = 1) -> dict[str, int]:
    """Add two numbers."""
    _count("add")
    return {"sum": a + b}


@tool()
def fail(reason: str) -> str:
    """Always fails with a ValueError."""
    _count("fail")
    raise ValueError(reason)


@tool()
def flaky_read() -> str:
    """A side-effect-free tool whose upstream is down."""
    _count("flaky_read")
    raise ConnectionError("upstream unreachable")


@tool(side_effects=True, policy="auto")
def flaky_write() -> str:
    """A tool with side effects whose upstream is down."""
    _count("flaky_write")
    raise ConnectionError("upstream unreachable")


@tool()
def recovers() -> str:
    """Fails once, then works."""
    if _count("recovers") == 1:
        raise ToolFailure("Upstream busy", retryable=True)
    return "ok"


@tool()
def throttled() -> str:
    """Hits an upstream rate limit."""
    _count("throttled")
    raise ToolFailure("Quota exhausted for now", error_type="rate_limit_error", retryable=True)


@tool(timeout_s=0.05, side_effects=True, policy="auto")
async def slow_async() -> str:
    """Takes far longer than its timeout."""
    _count("slow_async")
    await asyncio.sleep(5)
    return "late"


@tool(timeout_s=0.05, side_effects=True, policy="auto")
def slow_sync() -> str:
    """Blocks its thread past its timeout."""
    _count("slow_sync")
    time.sleep(0.3)
    return "late"


@tool()
def whoami(ctx: ToolContext) -> dict[str, Any]:
    """Report the caller."""
    ctx.progress("looking", 0.5)
    return {"user_id": ctx.user_id}


@tool()
def big(size: int) -> str:
    """Return a long text."""
    return "x" * size


TEST_TOOLSET = Toolset(
    id="testing",
    name="Testing",
    description="Throwaway tools for executor tests.",
    tools=[add, fail, flaky_read, flaky_write, recovers, throttled, slow_async, slow_sync, whoami, big],
)


@pytest.fixture(autouse=True)
def _toolsets(monkeypatch: pytest.MonkeyPatch) -> None:
    # all_toolsets() is cached; replacing it makes the real resolve() see only our toolset.
    monkeypatch.setattr(registry, "all_toolsets", lambda: {TEST_TOOLSET.id: TEST_TOOLSET})
    monkeypatch.setattr(running, "BACKOFF_S", 0)
    calls.clear()


async def run(name: str, arguments: str | dict[str, Any], user: Any, **kwargs: Any) -> Execution:
    return await execute(f"toolset__testing__{name}", arguments, user_id=user.pk, tool_call_id="call_1", **kwargs)


async def record_of(execution: Execution) -> ToolExecution:
    assert execution.record_id is not None
    return await ToolExecution.objects.aget(pk=execution.record_id)


async def test_successful_call_returns_the_result_and_records_it(user: Any) -> None:
    execution = await run("add", '{"a": 2, "b": 3}', user)

    assert execution.ok
    assert execution.result == {"sum": 5}
    record = await record_of(execution)
    assert record.status == ToolExecution.Status.SUCCESS
    assert record.toolset == "testing"
    assert record.tool == "add"
    assert record.arguments == {"a": 2, "b": 3}
    assert record.raw_arguments == '{"a": 2, "b": 3}'
    assert record.result == {"sum": 5}
    assert record.error_type == ""
    assert record.attempts == 1
    assert record.duration_ms is not None and record.duration_ms >= 0
    assert record.finished_at is not None
    assert record.user_id == user.pk


async def test_arguments_may_be_given_as_a_dict_or_empty_text(user: Any) -> None:
    from_dict = await run("add", {"a": 1}, user)
    empty = await run("whoami", "  ", user)

    assert from_dict.result == {"sum": 2}
    assert (await record_of(from_dict)).raw_arguments == '{"a": 1}'
    assert empty.ok


async def test_unknown_tool_is_an_unknown_tool_error(user: Any) -> None:
    execution = await run("nope", "{}", user)

    assert execution.error is not None
    assert execution.error.type == "unknown_tool"
    assert "toolset__testing__nope" in execution.error.message
    record = await record_of(execution)
    assert record.status == ToolExecution.Status.ERROR
    assert record.error_type == "unknown_tool"
    assert (record.toolset, record.tool) == ("testing", "nope")


async def test_a_name_outside_the_naming_scheme_is_unknown(user: Any) -> None:
    execution = await execute("rm_rf", "{}", user_id=user.pk, tool_call_id="call_1")

    assert execution.error is not None
    assert execution.error.type == "unknown_tool"
    record = await record_of(execution)
    assert (record.toolset, record.tool) == ("", "rm_rf")


async def test_invalid_json_is_a_validation_error(user: Any) -> None:
    execution = await run("add", '{"a": 2,', user)

    assert execution.error is not None
    assert execution.error.type == "validation_error"
    assert "not valid JSON" in execution.error.message
    assert calls == {}
    assert (await record_of(execution)).error_type == "validation_error"


async def test_json_that_is_not_an_object_is_a_validation_error(user: Any) -> None:
    execution = await run("add", "[1, 2]", user)

    assert execution.error is not None
    assert execution.error.type == "validation_error"
    assert "JSON object" in execution.error.message


@pytest.mark.parametrize(
    ("arguments", "expected_detail"),
    [
        ("{}", "'a' is a required property"),
        ('{"a": "two"}', "a: 'two' is not of type 'integer'"),
        ('{"a": 1, "b": 2.5}', "b: 2.5 is not of type 'integer'"),
        ('{"a": 1, "c": 3}', "'c' was unexpected"),
    ],
)
async def test_schema_violations_are_validation_errors_naming_the_field(
    user: Any, arguments: str, expected_detail: str
) -> None:
    execution = await run("add", arguments, user)

    assert execution.error is not None
    assert execution.error.type == "validation_error"
    assert any(expected_detail in detail for detail in execution.error.details), execution.error.details
    assert calls == {}, "the tool must not run with invalid arguments"
    record = await record_of(execution)
    assert record.status == ToolExecution.Status.ERROR
    assert record.error_type == "validation_error"


async def test_a_tool_raising_value_error_is_an_execution_error_with_its_message(user: Any) -> None:
    execution = await run("fail", '{"reason": "The city was not found."}', user)

    assert execution.error is not None
    assert execution.error.type == "execution_error"
    assert execution.error.message == "The city was not found."
    assert execution.error.retryable is False
    assert calls == {"fail": 1}
    record = await record_of(execution)
    assert record.status == ToolExecution.Status.ERROR
    assert record.error == "The city was not found."
    assert record.error_type == "execution_error"


async def test_tool_failure_keeps_its_error_type(user: Any) -> None:
    execution = await run("throttled", "{}", user)

    assert execution.error is not None
    assert execution.error.type == "rate_limit_error"
    assert execution.error.message == "Quota exhausted for now"
    assert (await record_of(execution)).error_type == "rate_limit_error"


async def test_an_upstream_rate_limit_is_not_retried(user: Any) -> None:
    # A rate limit does not clear within the backoff; retrying only burns more quota.
    await run("throttled", "{}", user)

    assert calls == {"throttled": 1}


@pytest.mark.parametrize("name", ["slow_async", "slow_sync"])
async def test_a_tool_past_its_timeout_is_a_timeout_error(user: Any, name: str) -> None:
    started = time.monotonic()
    execution = await run(name, "{}", user)
    elapsed = time.monotonic() - started

    assert execution.error is not None
    assert execution.error.type == "timeout_error"
    assert "0.05 seconds" in execution.error.message
    assert elapsed < 0.3 if name == "slow_async" else elapsed < 1
    record = await record_of(execution)
    assert record.status == ToolExecution.Status.ERROR
    assert record.error_type == "timeout_error"
    assert record.duration_ms is not None and record.duration_ms < 1000


async def test_side_effect_free_tool_is_retried_on_a_retryable_error(user: Any) -> None:
    execution = await run("flaky_read", "{}", user)

    assert calls == {"flaky_read": MAX_ATTEMPTS}
    assert execution.error is not None
    assert execution.error.type == "execution_error"
    assert execution.error.retryable is True
    assert "ConnectionError" in execution.error.message
    assert (await record_of(execution)).attempts == MAX_ATTEMPTS


async def test_tool_with_side_effects_is_never_retried(user: Any) -> None:
    execution = await run("flaky_write", "{}", user)

    assert calls == {"flaky_write": 1}
    assert execution.error is not None
    assert (await record_of(execution)).attempts == 1


async def test_non_retryable_error_is_not_retried_even_for_a_pure_tool(user: Any) -> None:
    await run("fail", '{"reason": "bad input"}', user)

    assert calls == {"fail": 1}


async def test_a_retry_that_succeeds_clears_the_error(user: Any) -> None:
    execution = await run("recovers", "{}", user)

    assert execution.ok
    assert execution.result == "ok"
    assert calls == {"recovers": 2}
    record = await record_of(execution)
    assert record.status == ToolExecution.Status.SUCCESS
    assert record.attempts == 2
    assert record.error_type == ""


async def test_retries_back_off_exponentially(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(running, "BACKOFF_S", 0.01)
    delays: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        delays.append(delay)
        await real_sleep(0)

    monkeypatch.setattr("toolsets.running.asyncio.sleep", recording_sleep)

    await run("flaky_read", "{}", user)

    assert delays == [0.01, 0.02]


async def test_a_tool_asking_for_context_gets_the_caller_and_progress(user: Any) -> None:
    seen: list[tuple[str, float | None]] = []

    execution = await run("whoami", "{}", user, progress=lambda text, percent=None: seen.append((text, percent)))

    assert execution.result == {"user_id": user.pk}
    assert seen == [("looking", 0.5)]


async def test_every_call_is_recorded(user: Any) -> None:
    await run("add", '{"a": 1}', user)
    await run("nope", "{}", user)
    await run("add", "not json", user)
    await run("fail", '{"reason": "x"}', user)

    rows = [row async for row in ToolExecution.objects.order_by("id").values_list("tool", "status", "error_type")]
    assert rows == [
        ("add", "success", ""),
        ("nope", "error", "unknown_tool"),
        ("add", "error", "validation_error"),
        ("fail", "error", "execution_error"),
    ]


async def test_model_content_truncates_long_results_and_says_so(user: Any) -> None:
    execution = await run("big", '{"size": 500}', user)

    content = execution.model_content(100)

    assert content.startswith("x" * 100 + "\n")
    assert "x" * 101 not in content
    assert "Truncated" in content
    assert "500 characters" in content
    assert "first 100" in content


async def test_model_content_leaves_short_results_alone(user: Any) -> None:
    execution = await run("add", '{"a": 1, "b": 1}', user)

    assert execution.model_content(100) == '{"sum": 2}'
    assert (await run("big", '{"size": 100}', user)).model_content(100) == "x" * 100


def test_model_content_of_an_error_lists_the_details() -> None:
    execution = Execution("call_1", None, None, {})
    execution.error = ToolError("validation_error", "Bad arguments.", details=["a: required", "b: wrong type"])

    assert execution.model_content(1000) == ("Error (validation_error): Bad arguments.\n- a: required\n- b: wrong type")


def test_model_content_keeps_non_ascii_readable() -> None:
    execution = Execution("call_1", None, None, {}, result={"city": "Zürich"})

    assert json.loads(execution.model_content(1000)) == {"city": "Zürich"}
    assert "Zürich" in execution.model_content(1000)
