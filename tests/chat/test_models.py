"""A turn's status transitions (chat/models/conversation.py, `Turn`): each happens once, from the one status
it may start from, even when two processes race for it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction

from chat.models import Chat, Turn

pytestmark = pytest.mark.django_db(transaction=True)

NOT_QUEUED = [
    Turn.Status.RUNNING,
    Turn.Status.COMPLETED,
    Turn.Status.FAILED,
    Turn.Status.CANCELLED,
    Turn.Status.INTERRUPTED,
]
NOT_RUNNING = [
    Turn.Status.QUEUED,
    Turn.Status.COMPLETED,
    Turn.Status.FAILED,
    Turn.Status.CANCELLED,
    Turn.Status.INTERRUPTED,
]


@pytest.fixture
def chat(user: Any, demo_model: Any) -> Chat:
    return Chat.objects.create(owner=user, model=demo_model)


def make_turn(chat: Chat, status: str = Turn.Status.QUEUED) -> Turn:
    return Turn.objects.create(chat=chat, model=chat.model, status=status)


def stored(turn: Turn) -> Turn:
    return Turn.objects.get(pk=turn.pk)


# --- claim ----------------------------------------------------------------------------------------


def test_claiming_a_queued_turn_starts_it(chat: Chat, django_assert_num_queries: Any) -> None:
    turn = make_turn(chat)

    claimed = Turn.claim(turn.pk)

    assert claimed is not None and claimed.pk == turn.pk
    assert claimed.status == Turn.Status.RUNNING and claimed.started_at is not None
    assert stored(turn).status == Turn.Status.RUNNING
    with django_assert_num_queries(0):  # the worker needs the chat, its owner and the model
        assert (claimed.chat.owner.username, claimed.model and claimed.model.model) == ("alice", "demo/tessera")


@pytest.mark.parametrize("status", NOT_QUEUED)
def test_only_a_queued_turn_can_be_claimed(chat: Chat, status: str) -> None:
    turn = make_turn(chat, status)

    assert Turn.claim(turn.pk) is None

    after = stored(turn)
    assert (after.status, after.started_at) == (status, None)


def test_a_turn_is_claimed_once(chat: Chat) -> None:
    turn = make_turn(chat)

    assert Turn.claim(turn.pk) is not None
    assert Turn.claim(turn.pk) is None


def test_of_two_workers_racing_for_a_turn_exactly_one_gets_it(chat: Chat) -> None:
    turns = [make_turn(chat) for _ in range(5)]
    start = threading.Barrier(2)
    won: dict[str, list[int]] = {"a": [], "b": []}

    def worker(name: str) -> None:
        try:
            for turn in turns:
                start.wait(timeout=10)
                if Turn.claim(turn.pk) is not None:
                    won[name].append(turn.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(name,)) for name in won]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(won["a"] + won["b"]) == [t.pk for t in turns]


def test_claiming_a_missing_turn_is_none(chat: Chat) -> None:
    assert Turn.claim(10**9) is None


# --- cancel_if_queued -----------------------------------------------------------------------------


def test_stop_before_any_worker_took_the_turn_cancels_it(chat: Chat) -> None:
    turn = make_turn(chat)

    assert Turn.cancel_if_queued(turn.pk) is True

    assert stored(turn).status == Turn.Status.CANCELLED
    assert Turn.claim(turn.pk) is None  # a worker arriving late finds nothing to run
    assert Turn.cancel_if_queued(turn.pk) is False


@pytest.mark.parametrize("status", NOT_QUEUED)
def test_a_turn_that_is_not_queued_is_not_cancelled_here(chat: Chat, status: str) -> None:
    turn = make_turn(chat, status)

    assert Turn.cancel_if_queued(turn.pk) is False

    assert stored(turn).status == status


# --- lock_running ---------------------------------------------------------------------------------


def test_a_running_turn_is_found_and_locked(chat: Chat) -> None:
    turn = make_turn(chat, Turn.Status.RUNNING)

    with transaction.atomic():
        locked = Turn.lock_running(turn.pk)

    assert locked is not None and locked.pk == turn.pk and locked.status == Turn.Status.RUNNING


@pytest.mark.parametrize("status", NOT_RUNNING)
def test_a_turn_that_is_not_running_is_not_locked(chat: Chat, status: str) -> None:
    turn = make_turn(chat, status)

    with transaction.atomic():
        assert Turn.lock_running(turn.pk) is None


# --- close ----------------------------------------------------------------------------------------


def test_closing_a_running_turn_stores_what_it_produced(chat: Chat) -> None:
    turn = make_turn(chat, Turn.Status.RUNNING)

    turn.close(Turn.Status.COMPLETED, iterations=3, notices=["n"], usage={"prompt_tokens": 5})

    after = stored(turn)
    assert (after.status, after.iterations, after.notices, after.usage) == ("completed", 3, ["n"], {"prompt_tokens": 5})
    assert after.finished_at is not None
    assert (turn.status, turn.iterations, turn.finished_at) == ("completed", 3, after.finished_at)


def test_closing_keeps_a_given_finish_time(chat: Chat) -> None:
    turn = make_turn(chat, Turn.Status.RUNNING)
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

    turn.close(Turn.Status.FAILED, error="Boom", finished_at=when)

    after = stored(turn)
    assert (after.status, after.error, after.finished_at) == ("failed", "Boom", when)


def test_a_turn_is_closed_once(chat: Chat) -> None:
    turn = make_turn(chat, Turn.Status.RUNNING)
    worker_copy = stored(turn)
    assert turn.close(Turn.Status.INTERRUPTED, error="The worker stopped.", error_kind="interrupted")

    assert not worker_copy.close(Turn.Status.COMPLETED, error="", error_kind="")

    after = stored(turn)
    assert (after.status, after.error) == ("interrupted", "The worker stopped.")


def test_an_agents_groups_are_cached_with_it_and_a_change_clears_them(db: Any) -> None:
    """The admin's form saves an agent's groups after its row: the cached agents must not keep
    the groups from before."""
    from django.contrib.auth.models import Group

    from chat.models import AgentDefinition

    agent = AgentDefinition.objects.create(slug="auditor", name="Auditor", description="d", instructions="i")
    assert [row.group_ids for row in AgentDefinition.enabled_rows()] == [frozenset()]
    staff = Group.objects.create(name="staff")
    agent.groups.add(staff)
    assert [row.group_ids for row in AgentDefinition.enabled_rows()] == [frozenset({staff.pk})]
    agent.groups.clear()
    assert [row.group_ids for row in AgentDefinition.enabled_rows()] == [frozenset()]


def test_the_default_model_is_chosen_among_those_open_to_the_user(user: Any, demo_model: Any) -> None:
    from django.contrib.auth.models import Group

    from chat.models import LLMModel

    staff = Group.objects.create(name="staff")
    best = LLMModel.objects.create(name="Best", model="openai/best", is_default=True)
    best.groups.add(staff)
    newest = LLMModel.objects.create(name="Newest", model="openai/newest")
    assert LLMModel.default(user.pk) == newest
    user.groups.add(staff)
    assert LLMModel.default(user.pk) == best
    newest.delete()
    best.delete()
    assert LLMModel.default(user.pk) == demo_model


# --- who is told (chat/signals.py) ------------------------------------------------------------------


@pytest.mark.parametrize("automated", [True, False])
def test_only_a_runs_turns_tell_their_start_and_end(chat: Chat, automated: bool) -> None:
    """Every way a turn starts or ends: claimed, closed by its worker (chat known), closed by
    the reaper (chat not loaded), stopped while queued. An automation's run follows its chat;
    any other chat's turns send nothing, so a turn pays no query for the run it is not."""
    from chat import signals

    Chat.objects.filter(pk=chat.pk).update(automated=automated)
    told: list[tuple[str, int, str]] = []

    def started(sender: Any, turn_id: int, **_: Any) -> None:
        told.append(("started", turn_id, ""))

    def closed(sender: Any, turn_id: int, status: str, **_: Any) -> None:
        told.append(("closed", turn_id, status))

    signals.turn_started.connect(started)
    signals.turn_closed.connect(closed)
    try:
        by_worker, by_reaper, stopped = make_turn(chat), make_turn(chat), make_turn(chat)
        claimed = Turn.claim(by_worker.pk)
        assert claimed is not None and claimed.close(Turn.Status.COMPLETED)
        Turn.claim(by_reaper.pk)
        reaped = Turn.objects.get(pk=by_reaper.pk)  # its chat not loaded
        assert reaped.close(Turn.Status.INTERRUPTED)
        assert Turn.cancel_if_queued(stopped.pk)
    finally:
        signals.turn_started.disconnect(started)
        signals.turn_closed.disconnect(closed)

    expected = [
        ("started", by_worker.pk, ""),
        ("closed", by_worker.pk, "completed"),
        ("started", by_reaper.pk, ""),
        ("closed", by_reaper.pk, "interrupted"),
        ("closed", stopped.pk, "cancelled"),
    ]
    assert told == (expected if automated else [])
