"""The one pending-question store (core/questions.py): asked, waited on across processes,
answered once, withdrawn and expired, against the suite's real Redis."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from django.conf import settings

from core import questions
from core.questions import Question

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sync() -> Any:
    return redis.from_url(settings.REDIS_URL)


@pytest.fixture
async def aio() -> AsyncIterator[Any]:
    client = redis.asyncio.from_url(settings.REDIS_URL)
    yield client
    await client.aclose()


def asked(kind: str = "approval", owner: int = 7, timeout_s: float = 60, **payload: Any) -> Question:
    return Question(kind, owner, payload or {"tool": "create_task"}, timeout_s)


async def test_an_open_question_is_found_with_its_kind_owner_payload_and_deadline(aio: Any, sync: Any) -> None:
    question = await questions.ask(aio, asked(chat_id=3, arguments={"name": "x"}))
    assert time.time() + 59 < question.deadline <= time.time() + 60
    for found in (questions.pending(sync, question.id), await questions.find(aio, question.id)):
        assert found == question
        assert found is not None and found.payload == {"chat_id": 3, "arguments": {"name": "x"}}
    # Its key lives a little past the deadline, not forever.
    assert 60 < await aio.ttl(f"{questions.PREFIX}:{question.id}") <= 60 + questions.GRACE_S + 1


async def test_a_question_of_another_kind_or_a_malformed_id_is_not_found(aio: Any, sync: Any) -> None:
    question = await questions.ask(aio, asked("approval"))
    assert questions.pending(sync, question.id, "approval") is not None
    assert questions.pending(sync, question.id, "elicitation") is None
    assert await questions.find(aio, question.id, "elicitation") is None
    for bad in ("nope", "../../etc", "x" * 200, "a" * 20 + "!", questions.new_id()):
        assert questions.pending(sync, bad) is None
        assert questions.answer(sync, bad, {"approved": True}) == "gone"


async def test_the_first_answer_wins_and_a_replay_changes_nothing(aio: Any, sync: Any) -> None:
    question = await questions.ask(aio, asked())
    assert questions.answer(sync, question.id, {"approved": True}) == "recorded"
    assert questions.answer(sync, question.id, {"approved": False}) == "answered"
    assert questions.answer(sync, question.id, {"approved": True}) == "answered"
    assert await questions.wait(aio, question) == {"approved": True}
    assert json.loads(sync.get(questions.answer_key(question.id))) == {"approved": True}


async def test_concurrent_answers_record_exactly_one(aio: Any) -> None:
    question = await questions.ask(aio, asked("elicitation"))

    def answer(n: int) -> str:
        return questions.answer(redis.from_url(settings.REDIS_URL), question.id, {"action": "accept", "n": n})

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(answer, range(24)))
    assert results.count("recorded") == 1 and results.count("answered") == 23
    winner = results.index("recorded")
    assert await questions.wait(aio, question) == {"action": "accept", "n": winner}


async def test_another_process_answers_the_waiting_one(aio: Any) -> None:
    question = await questions.ask(aio, asked())
    waiting = asyncio.create_task(questions.wait(aio, question, poll_s=0.05))
    script = (
        "import sys, redis; from core import questions; "
        "print(questions.answer(redis.from_url(sys.argv[1]), sys.argv[2], {'approved': True, 'reason': 'ok'}))"
    )
    answered = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, settings.REDIS_URL, question.id, cwd=ROOT, stdout=subprocess.PIPE
    )
    out, _ = await answered.communicate()
    assert out.decode().strip() == "recorded"
    assert await asyncio.wait_for(waiting, 5) == {"approved": True, "reason": "ok"}


async def test_nobody_answering_ends_the_wait_at_the_deadline(aio: Any, sync: Any) -> None:
    question = await questions.ask(aio, asked(timeout_s=0.4))
    started = time.monotonic()
    assert await questions.wait(aio, question, poll_s=0.05) is None
    assert 0.3 < time.monotonic() - started < 2
    # Nobody waits any more, but the question stays a little (the `/mcp` round trip: its client
    # calls again once its user answered, and an answer given meanwhile still counts) ...
    assert questions.pending(sync, question.id) is not None
    assert questions.answer(sync, question.id, {"approved": True}) == "recorded"
    assert await questions.answered(aio, question.id) == {"approved": True}


async def test_an_expired_question_cannot_be_answered(aio: Any, sync: Any) -> None:
    # ... until it expires, GRACE_S after its deadline (here at once).
    question = await questions.ask(aio, asked(timeout_s=0.1))
    await aio.pexpire(f"{questions.PREFIX}:{question.id}", 1)
    await asyncio.sleep(0.05)
    assert questions.pending(sync, question.id) is None and await questions.find(aio, question.id) is None
    assert questions.answer(sync, question.id, {"approved": True}) == "gone"
    assert await questions.answered(aio, question.id) is None


async def test_a_withdrawn_question_cannot_be_answered(aio: Any, sync: Any) -> None:
    question = await questions.ask(aio, asked())
    await questions.close(aio, question.id)
    assert questions.pending(sync, question.id) is None
    assert questions.answer(sync, question.id, {"approved": True}) == "gone"
    assert not await aio.exists(questions.answer_key(question.id))


async def test_close_takes_the_answer_with_it(aio: Any, sync: Any) -> None:
    question = await questions.ask(aio, asked())
    assert questions.answer(sync, question.id, {"approved": False}) == "recorded"
    await questions.close(aio, question.id)
    assert await questions.answered(aio, question.id) is None
    assert questions.answer(sync, question.id, {"approved": True}) == "gone"


async def test_an_answer_outlives_its_question(aio: Any, sync: Any) -> None:
    # The hub's ask: the client calls again after the question left Redis; the answer given in
    # time is still there for it, for a while.
    question = await questions.ask(aio, asked())
    assert questions.answer(sync, question.id, {"approved": True}) == "recorded"
    await aio.delete(f"{questions.PREFIX}:{question.id}")
    assert await questions.find(aio, question.id) is None
    assert await questions.answered(aio, question.id) == {"approved": True}
    assert 0 < await aio.ttl(questions.answer_key(question.id)) <= questions.ANSWER_TTL_S


async def test_stopping_the_wait_ends_it_at_once(aio: Any) -> None:
    question = await questions.ask(aio, asked())
    waiting = asyncio.create_task(questions.wait(aio, question, poll_s=5))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert time.monotonic() - started < 1
