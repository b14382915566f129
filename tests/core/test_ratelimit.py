"""core.ratelimit: the one fixed-window limiter (sign-ups, OAuth registrations, tool calls,
uploads) and its counting, shared with the growing delays after failures (core.backoff)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from core import backoff, ratelimit
from core.redis_client import sync_client

START = 1_800_000_000.0  # a multiple of 60 and of 3600: the start of a window of each


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    now = SimpleNamespace(value=START)
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: now.value))
    return now


def test_attempts_over_the_limit_in_one_window_are_refused(clock: SimpleNamespace) -> None:
    results = [ratelimit.allow("signup", "203.0.113.5", 3, window_s=3600) for _ in range(5)]
    assert results == [True, True, True, False, False]


def test_the_next_window_starts_afresh(clock: SimpleNamespace) -> None:
    for _ in range(3):
        ratelimit.allow("files.upload", 7, 2, window_s=60)
    assert not ratelimit.allow("files.upload", 7, 2, window_s=60)
    clock.value = START + 59.9
    assert not ratelimit.allow("files.upload", 7, 2, window_s=60)
    clock.value = START + 60
    assert ratelimit.allow("files.upload", 7, 2, window_s=60)


def test_each_scope_and_caller_has_its_own_count(clock: SimpleNamespace) -> None:
    assert ratelimit.allow("signup", "a", 1, window_s=3600)
    assert not ratelimit.allow("signup", "a", 1, window_s=3600)
    assert ratelimit.allow("signup", "b", 1, window_s=3600)
    assert ratelimit.allow("oauth-register", "a", 1, window_s=3600)
    # The same scope with another window length is another limit.
    assert ratelimit.allow("signup", "a", 1, window_s=60)


def test_a_zero_limit_refuses_everything_unless_it_means_unlimited(clock: SimpleNamespace) -> None:
    assert not ratelimit.allow("oauth-register", "a", 0, window_s=3600)
    assert all(ratelimit.allow("clock.calc", 1, 0, window_s=60, zero_is_unlimited=True) for _ in range(50))
    # Unlimited counts nothing: no key is left behind.
    assert not list(sync_client().scan_iter(f"{ratelimit.PREFIX}:clock.calc:*"))


def test_a_window_count_expires_after_its_window(clock: SimpleNamespace) -> None:
    ratelimit.allow("files.upload", 7, 5, window_s=60)
    (key,) = sync_client().scan_iter(f"{ratelimit.PREFIX}:files.upload:7:*")
    assert 60 < sync_client().ttl(key) <= 120


def test_hit_counts_and_keeps_the_key_for_its_ttl() -> None:
    key = f"{ratelimit.PREFIX}:test:hit"
    assert [ratelimit.hit(key, 30) for _ in range(3)] == [1, 2, 3]
    assert 0 < sync_client().ttl(key) <= 30
    ratelimit.hit(key, 300)  # each hit renews the key's time
    assert sync_client().ttl(key) > 30


def test_backoff_counts_failures_with_hit_and_forgets_them_when_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = backoff.Policy(free=2, first_s=10, max_s=40, memory_s=600)
    monkeypatch.setattr(backoff, "_now", lambda: START)
    assert [backoff.fail("signin", "alice", policy) for _ in range(5)] == [0, 10, 20, 40, 40]
    assert backoff.wait("signin", "alice") == 40
    assert backoff.wait("signin", "bob") == 0
    (count_key,) = sync_client().scan_iter(f"{backoff.PREFIX}:signin:*:n")
    assert int(sync_client().get(count_key) or 0) == 5
    assert 40 <= sync_client().ttl(count_key) <= 600
    backoff.clear("signin", "alice")
    assert backoff.wait("signin", "alice") == 0
    assert backoff.fail("signin", "alice", policy) == 0
