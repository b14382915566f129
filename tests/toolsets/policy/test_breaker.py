"""The circuit breaker's state machine on real Redis, driven by a fake clock."""

from __future__ import annotations

import logging

import pytest
import redis
from django.conf import settings

from toolsets.policy import breaker
from toolsets.policy.breaker import CLOSED, HALF_OPEN, OPEN, Breakers, Limits

TOOL = breaker.tool_scope("exa", "search")
SERVER = breaker.server_scope("mcp_units")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def board(clock: Clock) -> Breakers:
    return Breakers(
        redis.from_url(settings.REDIS_URL), clock=clock, limits=Limits(failures=3, window_s=60, cooldown_s=30)
    )


def state(board: Breakers, scope: str = TOOL) -> str:
    return board.states([(scope, "", "")])[0].state


def fail(board: Breakers, times: int = 1, scopes: tuple[str, ...] = (TOOL,), probes: tuple[str, ...] = ()) -> None:
    for _ in range(times):
        board.record(scopes, ok=False, probes=probes)


def test_opens_after_n_failures_within_the_window(board: Breakers) -> None:
    fail(board, 2)
    assert state(board) == CLOSED and board.allow([TOOL], lease_s=10).allowed
    assert board.record([TOOL], ok=False) == [(TOOL, OPEN)]
    assert state(board) == OPEN


def test_failures_outside_the_window_do_not_count(board: Breakers, clock: Clock) -> None:
    fail(board, 2)
    clock.advance(61)
    fail(board, 2)
    assert state(board) == CLOSED
    assert board.states([(TOOL, "", "")])[0].failures == 2


def test_successes_do_not_reset_the_count_within_the_window(board: Breakers) -> None:
    # Flapping (fail, ok, fail, ok, fail) is still three failures a minute.
    for _ in range(3):
        fail(board)
        board.record([TOOL], ok=True)
    assert state(board) == OPEN


def test_open_breaker_fails_fast_until_the_cool_down_is_over(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    clock.advance(10)
    verdict = board.allow([TOOL], lease_s=10)
    assert not verdict.allowed
    assert verdict.retry_after_s == pytest.approx(20)
    assert "temporarily disabled after repeated failures" in verdict.message("Search", clock())
    assert "in 20 s" in verdict.message("Search", clock())


def test_one_probe_after_the_cool_down_then_success_closes(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    clock.advance(30)
    probe = board.allow([TOOL], lease_s=10)
    assert probe.allowed and probe.probes
    assert state(board) == HALF_OPEN
    # While the probe runs, every other call still fails fast.
    other = board.allow([TOOL], lease_s=10)
    assert not other.allowed and other.retry_after_s == pytest.approx(10)
    assert board.record([TOOL], ok=True, probes=probe.probes) == [(TOOL, CLOSED)]
    assert state(board) == CLOSED
    assert board.allow([TOOL], lease_s=10).allowed
    # The failures before it opened are forgotten: it takes N new ones to open again.
    fail(board, 2)
    assert state(board) == CLOSED


def test_a_failed_probe_opens_it_again_for_a_whole_cool_down(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    clock.advance(31)
    probe = board.allow([TOOL], lease_s=10)
    clock.advance(2)
    assert board.record([TOOL], ok=False, probes=probe.probes) == [(TOOL, OPEN)]
    clock.advance(29)
    assert not board.allow([TOOL], lease_s=10).allowed
    clock.advance(1)
    assert board.allow([TOOL], lease_s=10).allowed


def test_a_probe_that_never_reports_frees_the_breaker_after_its_lease(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    clock.advance(30)
    assert board.allow([TOOL], lease_s=10).allowed  # its worker dies
    clock.advance(9)
    assert not board.allow([TOOL], lease_s=10).allowed
    clock.advance(1)
    assert board.allow([TOOL], lease_s=10).allowed


def test_a_released_probe_lets_the_next_call_probe_at_once(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    clock.advance(30)
    probe = board.allow([TOOL], lease_s=60)
    board.release(probe.probes)  # denied by the user, or stopped: it never ran
    assert board.allow([TOOL], lease_s=60).allowed


def test_looking_does_not_claim_the_probe(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    assert not board.allow([TOOL], lease_s=10, claim=False).allowed
    clock.advance(30)
    assert board.allow([TOOL], lease_s=10, claim=False).allowed
    assert state(board) == OPEN
    assert board.allow([TOOL], lease_s=10).allowed
    assert state(board) == HALF_OPEN


def test_a_late_failure_while_open_changes_nothing(board: Breakers, clock: Clock) -> None:
    fail(board, 3)
    clock.advance(5)
    assert board.record([TOOL], ok=False) == []  # a call that started before it opened
    clock.advance(25)
    assert board.allow([TOOL], lease_s=10).allowed


def test_a_server_breaker_stops_every_tool_of_the_server(board: Breakers, clock: Clock) -> None:
    convert, other = breaker.tool_scope("mcp_units", "convert"), breaker.tool_scope("mcp_units", "list_units")
    for _ in range(3):
        board.record([convert, SERVER], ok=False)
    verdict = board.allow([other, SERVER], lease_s=10)
    assert not verdict.allowed
    clock.advance(30)
    probe = board.allow([other, SERVER], lease_s=10)
    # Only the open breaker is probed; the closed one is untouched.
    assert probe.allowed and len(probe.probes) == 1
    assert state(board, other) == CLOSED
    board.record([other, SERVER], ok=True, probes=probe.probes)
    assert state(board, SERVER) == CLOSED


def test_a_rejected_call_holds_no_probe_lease(board: Breakers, clock: Clock) -> None:
    a, b = breaker.tool_scope("x", "a"), breaker.tool_scope("x", "b")
    fail(board, 3, scopes=(a,))
    clock.advance(20)
    fail(board, 3, scopes=(b,))
    clock.advance(10)  # a's cool-down is over, b's is not
    assert not board.allow([a, b], lease_s=10).allowed
    assert state(board, a) == OPEN  # not half-open: nobody is probing it
    assert board.allow([a], lease_s=10).allowed


def test_reset_closes_it_and_transitions_are_logged_and_counted(
    board: Breakers, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="toolsets.policy.breaker"):
        fail(board, 3)
        board.reset(TOOL)
    assert state(board) == CLOSED and board.allow([TOOL], lease_s=10).allowed
    assert [r.getMessage() for r in caplog.records] == [
        f"Circuit breaker {TOOL} → open",
        f"Circuit breaker {TOOL} → closed (reset by an administrator)",
    ]
    counts = breaker.transition_counts()
    assert counts[(TOOL, OPEN)] == 1 and counts[(TOOL, CLOSED)] == 1


def test_states_list_every_tool_and_server(db: None) -> None:
    scopes = breaker.all_scopes()
    assert (breaker.tool_scope("exa", "search"), "exa", "search") in scopes
    assert (breaker.tool_scope("clock_math", "current_time"), "clock_math", "current_time") in scopes
    states = breaker.all_states()
    assert len(states) == len(scopes) and {s.state for s in states} == {CLOSED}
