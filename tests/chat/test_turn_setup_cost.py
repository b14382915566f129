"""What a turn costs before its first token: trips to the database thread, and counting for a
model of unknown size (bench/RESULTS.md, "per-turn fixed cost")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db.backends.utils import CursorWrapper

from agent.context import Budget, Fitter
from chat.models import Chat, Message, Turn
from chat.selection import default_selection
from chat.worker import turns
from chat.worker.turns import run_turn
from memory.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_turn_goes_to_the_database_thread_a_handful_of_times(
    user: Any, demo_model: Any, steady_mcp_snapshot: None, monkeypatch: Any
) -> None:
    """Each trip costs the worker's loop a thread hop and Django's connection upkeep: the claim
    (with the fair-share slot), the set-up, the toolsets, and the slot handed back — not one
    trip per thing read."""
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"clock_math": ["calculate"]})
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="What is 6*7?")
    trips: list[str] = []
    real = turns.db

    def counting(fn: Any) -> Any:
        trips.append(getattr(fn, "__qualname__", repr(fn)))
        return real(fn)

    monkeypatch.setattr(turns, "db", counting)
    asyncio.run(run_turn(turn.pk))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert "42" in Message.objects.filter(turn=turn, role="assistant").last().content  # type: ignore[union-attr]
    assert len(trips) <= 4, trips


# A chat's first turn with the default toolsets, answered without a tool call: the claim and the
# turn read back (2), the owner's facts (1), the transcript (2: its messages, their files; a first
# turn is its own branch), the toolsets' availability and policies (5), the answer and the usage written (3), the
# turn closed (1), the chat's queued messages looked at (1). bench/RESULTS.md, "per-turn cost".
TURN_QUERIES = 15


@pytest.mark.parametrize(
    ("case", "extra"),
    [
        ("plain", 0),
        ("remembers", 1),  # the owner's memories, read for the prompt
        # An automation's run: the run told of the turn's start and end, and its automation's
        # budget read (run_budgets).
        ("automated", 3),
        ("follows", 1),  # a later exchange of the chat: its branch read to find its transcript
    ],
)
def test_a_turn_makes_a_fixed_number_of_queries(
    user: Any, demo_model: Any, steady_mcp_snapshot: None, case: str, extra: int
) -> None:
    """What this round added to every turn (automations, memory, knowledge) costs a turn that
    does not use it no query: each is known from the owner's facts or the chat itself."""
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    if case == "remembers":
        Memory.objects.create(owner=user, text="Prefers metric units")

    def queued(chat: Chat | None = None) -> Turn:
        chat = chat or Chat.objects.create(
            owner=user, model=demo_model, enabled_tools=dict(default_selection()), automated=case == "automated"
        )
        turn = Turn.objects.create(chat=chat, model=demo_model)
        Message.objects.create(chat=chat, turn=turn, role="user", content="Hello there")
        return turn

    # Once-only work (the app's settings row, the owner's usage row, caches) falls on this one.
    earlier = queued()
    asyncio.run(run_turn(earlier.pk))
    turn_id = queued(earlier.chat if case == "follows" else None).pk
    # Every thread's statements: the worker writes from the loop's thread pool.
    seen: list[str] = []
    original = getattr(CursorWrapper, "_execute")  # noqa: B009 - private, not in the type stubs

    def counting(self: Any, sql: str, *args: Any) -> Any:
        seen.append(sql)
        return original(self, sql, *args)

    setattr(CursorWrapper, "_execute", counting)  # noqa: B010
    try:
        asyncio.run(run_turn(turn_id))
    finally:
        setattr(CursorWrapper, "_execute", original)  # noqa: B010
    turn = Turn.objects.get(pk=turn_id)
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert len(seen) == TURN_QUERIES + extra, "\n".join(sql[:120] for sql in seen)


def test_a_model_of_unknown_size_is_not_counted() -> None:
    """No budget to fit to: the request goes as it is, and no message goes through the
    tokenizer (a new question would on every call)."""
    counted: list[Any] = []

    def count(message: dict[str, Any]) -> int:
        counted.append(message)
        return 10

    def count_tools(tools: list[dict[str, Any]]) -> int:
        counted.append(tools)
        return 10

    fitter = Fitter(Budget(None, 0), count, count_tools)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    fitted = asyncio.run(fitter.fit(messages, [{"type": "function", "function": {"name": "f"}}]))
    assert fitted.messages == messages and fitted.messages is not messages
    assert counted == [] and not fitted.compacted and not fitted.cut


def test_a_model_of_known_size_is_still_counted() -> None:
    counted: list[Any] = []

    def count(message: dict[str, Any]) -> int:
        counted.append(message)
        return 10

    fitter = Fitter(Budget(1000, 0), count, lambda tools: 0)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    fitted = asyncio.run(fitter.fit(messages, None))
    assert counted == messages and fitted.tokens == 20
