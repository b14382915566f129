"""The sandbox queue's task: run one call in the chat's session and stream its events back.

Sandbox workers (`manage.py serve` starts one; docs/operations/sandboxes.md runs them on
machines of their own) consume the shared `sandbox` queue and one of their own. The first call
of a chat goes to the shared queue; the worker that takes it keeps the session and records its
own queue in Redis, where the chat's next calls go while the session lives.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

from celery import shared_task
from django.conf import settings

from core.redis_client import sync_client

from . import jail, pool, protocol
from .session import Ended

log = logging.getLogger(__name__)
FLUSH_S = 0.1
FLUSH_CHARS = 16_000


class Events:
    """A call's events on its Redis list; output gathered and pushed every FLUSH_S."""

    def __init__(self, redis: Any, call_id: str) -> None:
        self.redis, self.key, self.cancel = redis, protocol.events_key(call_id), protocol.cancel_key(call_id)
        self.pending: list[tuple[str, str]] = []
        self.size = 0
        self.flushed = time.monotonic()
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def push(self, event: dict[str, Any]) -> None:
        with self.redis.pipeline() as pipe:
            pipe.rpush(self.key, json.dumps(event))
            pipe.expire(self.key, protocol.EVENTS_TTL_S)
            pipe.execute()

    def output(self, stream: str, text: str) -> None:
        (self.stderr if stream == "stderr" else self.stdout).append(text)
        self.pending.append((stream, text))
        self.size += len(text)
        if self.size >= FLUSH_CHARS:
            self.flush()

    def flush(self) -> None:
        merged: list[list[str]] = []
        for stream, text in self.pending:
            if merged and merged[-1][0] == stream:
                merged[-1][1] += text
            else:
                merged.append([stream, text])
        for stream, text in merged:
            self.push({"t": "output", "stream": stream, "text": text})
        self.pending, self.size, self.flushed = [], 0, time.monotonic()

    def cancelled(self) -> bool:
        # Asked every quarter second while the code runs: also when gathered output goes out.
        if self.pending and time.monotonic() - self.flushed >= FLUSH_S:
            self.flush()
        return bool(self.redis.exists(self.cancel))


# Celery ships no type information: its decorator would leave the task untyped.
@shared_task(name="sandbox.run_code", bind=True, acks_late=False)  # type: ignore[untyped-decorator]
def run_code(self: Any, call_id: str, chat_id: int, code: str, files: list[dict[str, Any]], seen: bool) -> None:
    """Runs `code` in chat `chat_id`'s session, with the chat's `files` at /data."""
    redis = sync_client()
    # Taken once: a call the caller gave up on (cancelled) or that another worker took is skipped.
    if redis.exists(protocol.cancel_key(call_id)) or not redis.set(
        protocol.claim_key(call_id), self.request.hostname or "worker", nx=True, ex=protocol.EVENTS_TTL_S
    ):
        return
    events = Events(redis, call_id)
    events.push({"t": "started"})
    problem = jail.missing()
    if problem:
        events.push({"t": "done", "unavailable": problem})
        return
    try:
        data_dir = pool.stage(chat_id, files)
        session, notice = pool.acquire(chat_id, data_dir, seen)
    except Ended as exc:
        events.push({"t": "done", "unavailable": str(exc)})
        return
    except OSError as exc:
        log.exception("Starting the sandbox of chat %s failed", chat_id)
        events.push({"t": "done", "unavailable": f"The sandbox could not start: {exc}"})
        return
    ended = ""
    try:
        if notice:
            events.push({"t": "notice", "text": notice})
        outcome = session.run(code, events.output, events.cancelled)
        ended = outcome.ended
    finally:
        pool.release(session, ended)
    events.flush()
    _remember(redis, chat_id, self, alive=not ended)
    limits = jail.limits()
    events.push(
        {
            "t": "done",
            "ok": outcome.ok and not ended,
            "error": outcome.error,
            "ended": ended,
            "notice": notice,
            "stdout": "".join(events.stdout)[: limits.output_chars],
            "stderr": "".join(events.stderr)[: limits.output_chars],
            "figures": outcome.figures,
            "files": [{"name": name, "data": base64.b64encode(data).decode()} for name, data in outcome.files],
            "skipped": outcome.skipped,
        }
    )


def _remember(redis: Any, chat_id: int, task: Any, *, alive: bool) -> None:
    """Where the chat's session lives (this worker's own queue, when it consumes one), and that
    the chat had one."""
    queue = protocol.direct_queue(settings.SANDBOX_QUEUE, task.request.hostname or "")
    consumed = set(task.app.amqp.queues.consume_from or ())
    with redis.pipeline() as pipe:
        pipe.set(protocol.seen_key(chat_id), 1, ex=protocol.SEEN_TTL_S)
        if alive and queue in consumed:
            pipe.set(protocol.node_key(chat_id), queue, ex=int(settings.SANDBOX_IDLE_S))
        else:
            pipe.delete(protocol.node_key(chat_id))
        pipe.execute()
