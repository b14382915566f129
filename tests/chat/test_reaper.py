"""A turn whose worker died is closed as interrupted without anyone loading a page, its open
tabs are told, and the text it had streamed survives (even with Redis's copy gone)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
import redis
import websockets
from django.conf import settings
from django.test import Client
from django.utils import timezone

from chat import live
from chat.models import Chat, LLMModel, Message, Turn
from chat.worker import reaper
from chat.worker.turns import INTERRUPTED_ERROR
from core.processes import worker_command

pytestmark = pytest.mark.django_db(transaction=True)


def _running(user: Any, demo_model: Any, *, age_s: float) -> Turn:
    chat = Chat.objects.create(owner=user, model=demo_model)
    return Turn.objects.create(
        chat=chat, model=demo_model, status=Turn.Status.RUNNING, started_at=timezone.now() - timedelta(seconds=age_s)
    )


async def _reap() -> list[int]:
    client = live.async_client()
    try:
        await client.delete(reaper.LOCK_KEY)
        return await reaper.reap_once(client)
    finally:
        await client.aclose()


def test_reaper_closes_only_turns_without_a_heartbeat(user: Any, demo_model: Any) -> None:
    abandoned = _running(user, demo_model, age_s=60)
    beating = _running(user, demo_model, age_s=60)
    young = _running(user, demo_model, age_s=1)
    redis.from_url(settings.REDIS_URL).set(live.key(beating.pk, "alive"), "1", ex=10)

    closed = asyncio.run(_reap())

    assert closed == [abandoned.pk]
    statuses = dict(Turn.objects.values_list("pk", "status"))
    assert statuses == {abandoned.pk: "interrupted", beating.pk: "running", young.pk: "running"}
    assert Turn.objects.get(pk=abandoned.pk).error == INTERRUPTED_ERROR


def test_one_worker_per_round(user: Any, demo_model: Any) -> None:
    _running(user, demo_model, age_s=60)

    async def two_workers() -> tuple[list[int], list[int]]:
        client = live.async_client()
        try:
            await client.delete(reaper.LOCK_KEY)
            return await reaper.reap_once(client), await reaper.reap_once(client)
        finally:
            await client.aclose()

    first, second = asyncio.run(two_workers())
    assert len(first) == 1 and second == []


def test_closing_twice_is_harmless(user: Any, demo_model: Any) -> None:
    turn = _running(user, demo_model, age_s=60)
    assert asyncio.run(_reap()) == [turn.pk]
    assert asyncio.run(_reap()) == []


@pytest.mark.integration
def test_killed_worker_turn_is_interrupted_pushed_and_keeps_its_text(stack: Any, user: Any, demo_model: Any) -> None:
    """A second worker takes the turn and is killed mid-answer; the stack's worker notices."""
    queue = f"doomed-{os.getpid()}"
    doomed = subprocess.Popen(
        [*worker_command(concurrency=2, hostname=f"doomed-{os.getpid()}@%h"), "-Q", queue],
        env=stack.env,
        stdout=open(stack.logs / "doomed-worker.log", "wb"),  # noqa: SIM115 - the child process owns it
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_queue_consumer(queue)
        # At the people's pace (the tests' default is faster): the answer must still be
        # streaming seconds after the first words, when the worker is killed.
        slow = LLMModel.objects.create(
            name="Demo at 40 tokens/s", model="demo/tessera", enabled=True, extra_params={"tokens_per_second": 40}
        )
        chat = Chat.objects.create(owner=user, model=slow)
        turn = Turn.objects.create(chat=chat, model=slow)
        Message.objects.create(chat=chat, turn=turn, role="user", content="Tell me a long story [demo:slow]")
        client = Client()
        client.force_login(user)
        cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
        http = httpx.Client(base_url=stack.url, cookies=cookies)
        http.get(f"/chats/{chat.pk}/")

        async def watch() -> tuple[list[str], float]:
            header = "; ".join(f"{k}={v}" for k, v in {**cookies, "csrftoken": http.cookies["csrftoken"]}.items())
            async with websockets.connect(
                f"{stack.ws_url}/ws/chats/{chat.pk}/", additional_headers={"Cookie": header, "Origin": stack.url}
            ) as ws:
                from chat.tasks import run_turn

                run_turn.apply_async((turn.pk,), queue=queue)
                frames: list[str] = []
                # Until some text has streamed and at least one checkpoint had time to happen.
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    frames.append(str(await asyncio.wait_for(ws.recv(), timeout=30)))
                    if sum(f.count("beforeend:#tail-") + f.count("beforeend:#blocks-") for f in frames) > 20:
                        break
                await asyncio.sleep(2.5)
                doomed.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                # Redis's copy of the answer goes too: the database checkpoint must be enough.
                redis.from_url(settings.REDIS_URL).delete(live.key(turn.pk, "live"))
                while True:
                    frame = str(await asyncio.wait_for(ws.recv(), timeout=40))
                    frames.append(frame)
                    if 'data-turn-status="interrupted"' in frame:
                        return frames, time.monotonic() - killed_at

        frames, waited = asyncio.run(watch())
    finally:
        if doomed.poll() is None:
            doomed.kill()
        doomed.wait()

    # The page heard "running" as soon as the worker claimed the turn, before any text.
    first_text = next(i for i, f in enumerate(frames) if "#tail-" in f or "#blocks-" in f)
    assert any('data-turn-status="running"' in f for f in frames[:first_text])
    assert waited < 30, f"noticed only after {waited:.1f} s"
    turn.refresh_from_db()
    assert turn.status == Turn.Status.INTERRUPTED
    kept = Message.objects.get(turn=turn, role="assistant")
    assert kept.metadata == {"stopped": True}
    assert len(kept.content) > 40, kept.content
    assert "Interrupted." in frames[-1]
    words = re.findall(r"[A-Za-z]{5,}", kept.content)[:8]
    assert words and all(word in frames[-1] for word in words)


def _wait_for_queue_consumer(queue: str, timeout: float = 60) -> None:
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replies = app.control.inspect(timeout=0.5).active_queues() or {}
        if any(q["name"] == queue for queues in replies.values() for q in queues):
            return
    raise RuntimeError(f"no worker consumed {queue} within {timeout} s")
