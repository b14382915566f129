"""The worker process's one event loop: every turn runs in it and shares its clients."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chat.models import Chat, Message, Turn
from chat.rendering import fingerprint, render_complete
from chat.worker import loop as worker_loop
from chat.worker.turns import run_turn_sync


@pytest.fixture
def fresh_loop() -> Iterator[None]:
    worker_loop.shutdown()
    yield
    worker_loop.shutdown()


def test_turns_share_one_loop_on_its_own_thread(fresh_loop: None) -> None:
    async def where() -> tuple[asyncio.AbstractEventLoop, str]:
        return asyncio.get_running_loop(), threading.current_thread().name

    first = worker_loop.get().run(where())
    second = worker_loop.get().run(where())
    assert first == second
    assert first[1] == "turn-loop"
    assert first[1] != threading.current_thread().name


def test_a_failing_coroutine_raises_in_the_waiting_thread_and_the_loop_goes_on(fresh_loop: None) -> None:
    async def boom() -> None:
        raise ValueError("model output was not JSON")

    async def fine() -> int:
        return 7

    with pytest.raises(ValueError, match="not JSON"):
        worker_loop.get().run(boom())
    assert worker_loop.get().run(fine()) == 7


def test_blocking_calls_go_to_the_loops_own_thread_pool(fresh_loop: None, settings: Any) -> None:
    settings.TESSERA = {**settings.TESSERA, "WORKER_IO_THREADS": 3}
    worker_loop.shutdown()

    async def names() -> set[str]:
        loop = asyncio.get_running_loop()
        gate = threading.Barrier(3, timeout=5)

        def wait() -> str:
            gate.wait()  # only passes if three calls run at once
            return threading.current_thread().name

        return set(await asyncio.gather(*(loop.run_in_executor(None, wait) for _ in range(3))))

    found = worker_loop.get().run(names())
    assert len(found) == 3
    assert all(name.startswith("turn-io") for name in found)


def test_run_from_inside_the_loop_is_refused(fresh_loop: None) -> None:
    loop = worker_loop.get()

    async def nested() -> None:
        loop.run(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="inside the loop"):
        loop.run(nested())


@pytest.mark.django_db(transaction=True)
def test_two_turns_in_a_row_run_in_the_shared_loop(fresh_loop: None, user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    for text in ("What time is it?", "Tell me a joke"):
        turn = Turn.objects.create(chat=chat, model=demo_model)
        Message.objects.create(chat=chat, turn=turn, role="user", content=text)
        run_turn_sync(turn.pk)
        turn.refresh_from_db()
        assert turn.status == Turn.Status.COMPLETED, turn.error
    answers = Message.objects.filter(chat=chat, role="assistant").exclude(content="")
    assert answers.count() >= 2
    # What was streamed is kept rendered, exactly as a page would render it.
    for answer in answers:
        assert answer.html_key == fingerprint()
        assert answer.html == render_complete(answer.content)


def test_litellm_gets_few_threads_for_its_end_of_stream_work(fresh_loop: None, settings: Any) -> None:
    settings.TESSERA = {**settings.TESSERA, "WORKER_LIBRARY_THREADS": 2}
    worker_loop.shutdown()

    async def tokens() -> float:
        import anyio.to_thread

        return anyio.to_thread.current_default_thread_limiter().total_tokens

    assert worker_loop.get().run(tokens()) == 2


async def test_stop_is_polled_every_round_and_a_heartbeat_renewed_about_once_a_second() -> None:
    from agent.loop import CancelToken
    from chat import live
    from chat.worker.loop import HEARTBEAT_S, TurnWatch

    redis = live.async_client()
    watch = TurnWatch(redis, interval_s=60)
    watch.turns[901] = CancelToken()
    await redis.delete(live.key(901, "alive"), live.key(902, "alive"), live.key(901, "cancel"))

    await watch.poll()  # a new turn: its heartbeat at once
    assert await redis.exists(live.key(901, "alive"))
    await redis.delete(live.key(901, "alive"))
    watch.turns[902] = CancelToken()
    await redis.set(live.key(901, "cancel"), "1")
    await watch.poll()  # within the second: Stop seen, only the newcomer's heartbeat written

    assert watch.turns[901].is_set()
    assert not await redis.exists(live.key(901, "alive"))
    assert await redis.exists(live.key(902, "alive"))
    watch._beaten[901] -= HEARTBEAT_S
    await watch.poll()
    assert await redis.exists(live.key(901, "alive"))
    await redis.delete(live.key(901, "alive"), live.key(902, "alive"), live.key(901, "cancel"))
    await redis.aclose()
