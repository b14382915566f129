"""The workers' fair share, on real Redis: caps per user and per token, a queue per user that
moves on as slots come back, and slots that lapse when a worker dies."""

from __future__ import annotations

import time

import pytest

from chat import live
from chat.worker import fair_share
from chat.worker.fair_share import Busy, Caps
from core.redis_client import sync_client

CAPS = Caps(user=2, token=1)


def _running(kind: str, who: str | int) -> set[int]:
    members: list[bytes] = sync_client().zrange(fair_share.running_key(kind, who), 0, -1)  # type: ignore[assignment]
    return {int(m) for m in members}


def test_a_users_turns_past_the_cap_queue_and_start_in_order_as_slots_come_back() -> None:
    assert fair_share.submit(1, 7, caps=CAPS)
    assert fair_share.submit(2, 7, caps=CAPS)
    assert not fair_share.submit(3, 7, caps=CAPS)
    assert not fair_share.submit(4, 7, caps=CAPS)
    # Another user is not held up by the first one's queue.
    assert fair_share.submit(5, 8, caps=CAPS)
    assert fair_share.waiting_users() == [7]
    assert fair_share.pump(7, CAPS) == []  # nothing freed yet

    # Each release says whether the user still has turns waiting (only then is a pump needed).
    assert fair_share.release(1, 7, "") is True
    assert fair_share.pump(7, CAPS) == [(3, "")]
    assert _running("user", 7) == {2, 3}
    assert fair_share.release(2, 7, "") is True
    assert fair_share.release(3, 7, "") is True
    assert fair_share.pump(7, CAPS) == [(4, "")]
    assert fair_share.waiting_users() == []
    assert fair_share.release(4, 7, "") is False
    assert fair_share.release(5, 8, "") is False


def test_a_new_turn_waits_behind_its_users_queue_even_when_a_slot_is_free() -> None:
    assert fair_share.submit(1, 7, caps=CAPS)
    assert fair_share.submit(2, 7, caps=CAPS)
    assert not fair_share.submit(3, 7, caps=CAPS)
    # A slot lapsed without anyone pumping: the next new turn does not jump the queue.
    fair_share.release(1, 7, "")
    assert not fair_share.submit(4, 7, caps=CAPS)
    assert fair_share.pump(7, CAPS) == [(3, "")]


def test_an_api_caller_over_a_cap_is_refused_and_nothing_is_kept() -> None:
    assert fair_share.submit(1, 7, "token:1", caps=CAPS, refuse=True)
    with pytest.raises(Busy) as refused:
        fair_share.submit(2, 7, "token:1", caps=CAPS, refuse=True)
    assert "token" in refused.value.message and refused.value.retry_after > 0
    # Another token of the same user still fits under the user's cap…
    assert fair_share.submit(3, 7, "token:2", caps=CAPS, refuse=True)
    # …and then the user's cap is reached whatever the token.
    with pytest.raises(Busy, match="You already have 2 answers running"):
        fair_share.submit(4, 7, "token:3", caps=CAPS, refuse=True)
    assert _running("user", 7) == {1, 3}
    assert sync_client().llen(fair_share.waiting_key(7)) == 0


def test_a_queued_turn_whose_token_is_full_lets_the_users_other_turns_pass() -> None:
    caps = Caps(user=3, token=1)
    assert fair_share.submit(1, 7, "token:1", caps=caps)
    assert not fair_share.submit(2, 7, "token:1", caps=caps)  # its token is full
    assert not fair_share.submit(3, 7, "", caps=caps)  # behind it in the queue
    assert fair_share.pump(7, caps) == [(3, "")]  # the chat's turn passes the token's
    fair_share.release(1, 7, "token:1")
    assert fair_share.pump(7, caps) == [(2, "token:1")]


def test_zero_means_no_cap() -> None:
    caps = Caps(user=0, token=0)
    assert all(fair_share.submit(n, 7, "token:1", caps=caps) for n in range(1, 30))


def test_a_dead_workers_slots_lapse_with_its_heartbeat() -> None:
    assert fair_share.submit(1, 7, caps=CAPS)
    assert fair_share.submit(2, 7, caps=CAPS)
    redis = sync_client()
    # Both claimed: from now on their heartbeats hold the slots.
    for turn in (1, 2):
        fair_share.claimed(turn, 7, "")
        redis.set(live.key(turn, "alive"), "1", ex=live.ALIVE_TTL_S)
    assert not fair_share.submit(3, 7, caps=CAPS)
    time.sleep(0.01)
    assert fair_share.pump(7, CAPS) == []
    # Turn 1's worker was killed: its heartbeat is gone, and the next pump (the reaper's round)
    # hands its slot to the queued turn.
    redis.delete(live.key(1, "alive"))
    assert fair_share.pump(7, CAPS) == [(3, "")]
    assert _running("user", 7) == {2, 3}


def test_a_turn_sent_to_the_workers_but_never_claimed_gives_its_slot_back_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fair_share, "DISPATCH_S", 0.05)
    assert fair_share.submit(1, 7, caps=CAPS)
    assert fair_share.submit(2, 7, caps=CAPS)
    assert not fair_share.submit(3, 7, caps=CAPS)
    # Past the dispatch allowance the two unclaimed slots are given back; on a loaded machine
    # the pump may come a moment after that, so it is asked again until then.
    time.sleep(0.1)
    deadline = time.monotonic() + 10
    while not (pumped := fair_share.pump(7, CAPS)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pumped == [(3, "")]


def test_the_scripts_look_for_the_heartbeat_the_workers_write() -> None:
    assert live.key(42, "alive") == "tessera:turn:42:alive"
    assert "'tessera:turn:' .. member .. ':alive'" in fair_share._COUNT


def test_queued_notes_are_read_in_one_go() -> None:
    sync_client().set(fair_share.note_key(5), "Queued: …")
    assert fair_share.notes([4, 5]) == {5: "Queued: …"}
    assert fair_share.notes([]) == {}
