"""Running a turn in the worker: claiming, redelivery after a dead worker, Stop while queued."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connections
from django.db.backends.signals import connection_created

from chat import live
from chat.models import Chat, Message, Turn
from chat.worker.turns import INTERRUPTED_ERROR, run_turn
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db(transaction=True)


def live_state(turn: Turn, text: str) -> bytes:
    return live.LiveTurn(turn.pk, turn.chat_id, seq=4, steps=[live.LiveStep(0, text=text)]).to_json()


def test_redelivered_turn_of_a_dead_worker_is_interrupted_not_rerun(user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.RUNNING)
    Message.objects.create(chat=chat, turn=turn, role="user", content="Tell me a story")
    # What the dead worker had stored: a step with a tool call that never got its result…
    Message.objects.create(
        chat=chat,
        turn=turn,
        step=0,
        role="assistant",
        content="",
        tool_calls=[
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "toolset__clock_math__calculate", "arguments": '{"expression": "1+1"}'},
            }
        ],
    )
    ToolExecution.objects.create(
        user=user,
        turn=turn,
        step=0,
        position=0,
        tool_call_id="c1",
        toolset="clock_math",
        tool="calculate",
        status="running",
    )
    # …and the text it had streamed of the next step; its heartbeat has expired.
    client = redis.from_url(settings.REDIS_URL)
    client.set(live.key(turn.pk, "live"), live_state(turn, "Once upon a"))

    asyncio.run(run_turn(turn.pk))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.INTERRUPTED and turn.error == INTERRUPTED_ERROR
    # Step 0 was already stored by the dead worker: it is not stored twice.
    assert Message.objects.filter(turn=turn, role="assistant").count() == 1
    tool_message = Message.objects.get(turn=turn, role="tool")
    assert tool_message.tool_call_id == "c1" and tool_message.content.startswith("Error:")
    assert ToolExecution.objects.get(tool_call_id="c1").status == "error"
    state = json.loads(client.get(live.key(turn.pk, "live")) or "{}")
    assert state["status"] == "interrupted" and state["seq"] == 5


def test_interrupted_turn_keeps_streamed_text(user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.RUNNING)
    Message.objects.create(chat=chat, turn=turn, role="user", content="Tell me a story")
    redis.from_url(settings.REDIS_URL).set(live.key(turn.pk, "live"), live_state(turn, "Once upon"))
    asyncio.run(run_turn(turn.pk))
    kept = Message.objects.get(turn=turn, role="assistant")
    assert kept.content == "Once upon" and kept.metadata == {"stopped": True}


def test_turn_with_a_live_worker_is_left_alone(user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.RUNNING)
    redis.from_url(settings.REDIS_URL).set(live.key(turn.pk, "alive"), "1", ex=10)
    asyncio.run(run_turn(turn.pk))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.RUNNING


def test_turn_stopped_while_queued_never_runs(client: Any, user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="hi")
    client.force_login(user)
    assert client.post(f"/chats/{chat.pk}/stop/").status_code == 204
    asyncio.run(run_turn(turn.pk))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.CANCELLED
    assert not Message.objects.filter(turn=turn, role="assistant").exists()


def test_a_queued_turn_runs_to_completion_in_process(user: Any, demo_model: Any, settings: Any) -> None:
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"clock_math": ["calculate"]})
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="What is 6*7?")
    asyncio.run(run_turn(turn.pk))
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    assert "42" in Message.objects.filter(turn=turn, role="assistant").last().content  # type: ignore[union-attr]
    assert turn.iterations == 1 and turn.finished_at is not None


def test_unusable_selected_toolset_is_skipped_with_a_notice(user: Any, demo_model: Any) -> None:
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"exa": ["search"]})
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="latest news about AI")
    asyncio.run(run_turn(turn.pk))
    turn.refresh_from_db()
    assert turn.notices == ["Not available for this answer: Exa web search (API key not configured)."]
    assert not ToolExecution.objects.filter(turn=turn).exists()


def test_one_poll_serves_every_running_turn(redis_server: str) -> None:
    from agent.loop import CancelToken
    from chat.worker.loop import TurnWatch

    async def scenario() -> tuple[bool, bool, list[int]]:
        client = live.async_client()
        try:
            watch = TurnWatch(client, interval_s=0.02)
            first, second = CancelToken(), CancelToken()
            watch.add(101, first)
            watch.add(102, second)
            await client.set(live.key(102, "cancel"), "1")
            await asyncio.wait_for(second.wait(), 2)
            alive = [int(await client.ttl(live.key(turn_id, "alive"))) for turn_id in (101, 102)]
            watch.remove(101)
            watch.remove(102)
            await asyncio.sleep(0.05)
            return first.is_set(), second.is_set(), alive
        finally:
            await client.aclose()

    first_set, second_set, alive = asyncio.run(scenario())
    assert (first_set, second_set) == (False, True)
    assert all(0 < ttl <= live.ALIVE_TTL_S for ttl in alive)


@pytest.mark.parametrize("piped", [True, False], ids=["pipelined connection", "redis-py"])
def test_polling_survives_a_redis_error(piped: bool, monkeypatch: Any) -> None:
    """A failed round (Redis away for a moment) is logged and the next one sees the Stop flag,
    on the loop's pipelined connection and on redis-py's (a URL the pipe does not speak)."""
    from agent.loop import CancelToken
    from chat.worker.loop import TurnWatch
    from core import redis_pipe

    turn_id = 987_654_321
    calls: list[Any] = []
    if piped:
        original = redis_pipe.RedisPipe.execute_many

        async def flaky(self: redis_pipe.RedisPipe, *commands: Any) -> Any:
            calls.append(commands)
            if len(calls) == 1:
                raise redis.exceptions.ConnectionError("Redis went away")
            return await original(self, *commands)

        monkeypatch.setattr(redis_pipe.RedisPipe, "execute_many", flaky)
    else:
        monkeypatch.setattr(redis_pipe, "for_loop", lambda url: None)

    async def scenario() -> bool:
        client = live.async_client()
        if not piped:
            original_pipeline = client.pipeline

            def pipeline(transaction: bool) -> Any:
                calls.append(transaction)
                if len(calls) == 1:
                    raise redis.exceptions.ConnectionError("Redis went away")
                return original_pipeline(transaction=transaction)

            client.pipeline = pipeline  # type: ignore[method-assign, assignment]
        await client.set(live.key(turn_id, "cancel"), "1", ex=60)
        watch = TurnWatch(client, interval_s=0.01)
        token = CancelToken()
        watch.add(turn_id, token)
        await asyncio.wait_for(token.wait(), 2)
        watch.remove(turn_id)
        alive = await client.exists(live.key(turn_id, "alive"))
        await client.delete(live.key(turn_id, "cancel"), live.key(turn_id, "alive"))
        await client.aclose()
        return token.is_set() and bool(alive)

    assert asyncio.run(scenario())
    assert len(calls) >= 2


_counting: list[list[str]] = []


def _count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    for seen in _counting:
        seen.append(sql)
    return execute(sql, params, many, context)


def _count_on(sender: Any, connection: Any, **kwargs: Any) -> None:
    # Once per connection object: it reconnects (and signals again) after every call.
    if _count not in connection.execute_wrappers:
        connection.execute_wrappers.append(_count)


@contextmanager
def _queries_on_every_thread() -> Iterator[list[str]]:
    """The statements run on any connection, the worker loop's database threads included
    (pytest-django's query counters see the test thread's connection only)."""
    seen: list[str] = []
    for connection in connections.all():
        _count_on(None, connection)
    connection_created.connect(_count_on)
    _counting.append(seen)
    try:
        yield seen
    finally:
        _counting.remove(seen)
        connection_created.disconnect(_count_on)


def test_a_turn_costs_a_fixed_handful_of_queries(user: Any, demo_model: Any, steady_mcp_snapshot: None) -> None:
    """Claim, transcript, tools, the answer, its tokens and the close: each once, whatever the
    chat holds already."""
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"clock_math": ["calculate"]})
    counts = []
    for _ in range(3):
        turn = Turn.objects.create(chat=chat, model=demo_model, parent=chat.turns.order_by("-id").first())
        Message.objects.create(chat=chat, turn=turn, role="user", content="Tell me a story")
        with _queries_on_every_thread() as seen:
            asyncio.run(run_turn(turn.pk))
        turn.refresh_from_db()
        assert turn.status == Turn.Status.COMPLETED, turn.error
        counts.append(len(seen))
    # The claim, the turn, the owner's groups and the model's (one), the transcript (three), the
    # owner's memories, the tools and their policies (five), the answer and its usage (three), the
    # close, the chat's waiting messages (chat/pending.py) and an automation run's two (claimed,
    # closed: automations/runs.py).
    assert counts[1] == counts[2] <= 19, (counts, seen)


def test_a_turn_whose_model_the_owner_lost_before_it_ran_fails_clearly(user: Any, demo_model: Any) -> None:
    """Groups are read when the turn runs: a model the owner was removed from since sending is
    not called."""
    from django.contrib.auth.models import Group

    from chat.worker.turns import model_not_open_error

    staff = Group.objects.create(name="staff")
    demo_model.groups.add(staff)
    user.groups.add(staff)
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="hello")
    user.groups.remove(staff)

    asyncio.run(run_turn(turn.pk))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert turn.error == model_not_open_error(demo_model.name)
    assert "not available to your groups" in turn.error
    assert not Message.objects.filter(turn=turn, role="assistant").exists()


def test_a_turn_whose_model_was_turned_off_before_it_ran_says_so(user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="hello")
    demo_model.enabled = False
    demo_model.save()

    asyncio.run(run_turn(turn.pk))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert (
        turn.error
        == "The model Demo (offline) was turned off by an administrator. Choose another one in the chat's settings."
    )
