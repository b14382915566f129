"""One asyncio event loop per worker process, on its own thread; every turn of the process runs
in it.

Why one loop and not `asyncio.run()` per turn: clients that are bound to a loop (LiteLLM's HTTP
sessions, the Redis pool, the channel layer's connections) are then made once per process and
shared by every turn, so a provider sees one pooled connection instead of a new one (and a TLS
handshake) per turn, and a finished turn leaves no loop, session or socket behind for the
garbage collector. Measured in `bench/RESULTS.md`: per-turn loops caused collector pauses of
several seconds once a hundred turns were in flight.

Celery's pool threads only wait here for their turn's result, which keeps Celery's semantics
(acks_late, one task per turn, warm shutdown waits for running turns).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.conf import settings

from agent import loops
from agent.loop import CancelToken
from chat import live
from core import redis_pipe

log = logging.getLogger(__name__)
T = TypeVar("T")
# After the grace period, how long the stopped turns get to save what they streamed before the
# process gives up on them and exits.
HARD_STOP_S = 15.0
# How often a running turn's heartbeat is renewed (it lives live.ALIVE_TTL_S).
HEARTBEAT_S = 1.0


def db(fn: Any) -> Any:
    """`fn` as a coroutine function run in the loop's thread pool, with Django's connection upkeep
    around each call: the pool's threads live as long as the worker, so nothing else would close
    a connection that broke or outlived CONN_MAX_AGE."""
    return database_sync_to_async(fn, thread_sensitive=False)


class TurnWatch:
    """Polls the Stop flags and refreshes the heartbeats of every turn a process runs, in one
    Redis round trip per interval however many turns there are (a poll per turn would cost a
    process with 200 turns over a thousand round trips a second)."""

    def __init__(self, redis: Any, interval_s: float) -> None:
        self.redis = redis
        self.interval_s = interval_s
        self.turns: dict[int, CancelToken] = {}
        self._task: asyncio.Task[None] | None = None
        # Turns stopped because the worker is shutting down: they end as interrupted, not as
        # stopped by the reader. Once `closing`, a turn that starts is stopped at once.
        self.interrupted: set[int] = set()
        self.closing = False
        self._beaten: dict[int, float] = {}  # turn id → when its heartbeat was last renewed

    def add(self, turn_id: int, cancel: CancelToken) -> None:
        self.turns[turn_id] = cancel
        if self.closing:
            self.interrupted.add(turn_id)
            cancel.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def interrupt_all(self) -> None:
        """The grace period is over: every turn still running stops and keeps what it streamed."""
        self.closing = True
        for turn_id, cancel in self.turns.items():
            self.interrupted.add(turn_id)
            cancel.set()

    def remove(self, turn_id: int) -> None:
        self.turns.pop(turn_id, None)
        self._beaten.pop(turn_id, None)
        self.interrupted.discard(turn_id)

    async def _run(self) -> None:
        while self.turns:
            try:
                await self.poll()
            except Exception:
                # A Redis hiccup must not end the polling: the heartbeat outlives a few missed
                # rounds (ALIVE_TTL_S) and Stop is only late.
                log.warning("Polling Stop flags failed", exc_info=True)
            await asyncio.sleep(self.interval_s)

    async def poll(self) -> None:
        ids = list(self.turns)
        # Stop is polled every round; a heartbeat (which lives ALIVE_TTL_S) only needs renewing
        # about once a second, and at once for a turn that just started.
        now = time.monotonic()
        due = [turn_id for turn_id in ids if now - self._beaten.get(turn_id, 0.0) >= HEARTBEAT_S]
        mget = ("MGET", *[live.key(turn_id, "cancel") for turn_id in ids])
        beats = [("SET", live.key(turn_id, "alive"), "1", "EX", live.ALIVE_TTL_S) for turn_id in due]
        # On the loop's pipelined connection when it has one: rounds come many times a second,
        # and a command there costs a third of redis-py's CPU (core/redis_pipe.py).
        piped = redis_pipe.for_loop(settings.REDIS_URL)
        if piped is not None:
            flags, *_ = await piped.execute_many(mget, *beats)
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.mget(mget[1:])
                for command in beats:
                    pipe.set(command[1], "1", ex=live.ALIVE_TTL_S)
                flags, *_ = await pipe.execute()
        for turn_id in due:
            self._beaten[turn_id] = now
        for turn_id, flag in zip(ids, flags, strict=True):
            cancel = self.turns.get(turn_id)
            if flag and cancel is not None and not cancel.is_set():
                cancel.set()


class WorkerLoop:
    def __init__(self, *, io_threads: int, library_threads: int = 0, use_uvloop: bool = False) -> None:
        self.loop = _new_loop(use_uvloop)
        # The providers' HTTP sessions are shared by every turn of this loop; stop() closes them.
        loops.keep_sessions(self.loop)
        # Database calls and sync tools run in the loop's default executor: sized for many turns
        # at once (the stdlib default is cores + 4).
        self.loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(max_workers=io_threads, thread_name_prefix="turn-io")
        )
        self._redis: aioredis.Redis | None = None
        self._watch: TurnWatch | None = None
        self.draining = False
        self._thread = threading.Thread(target=self._run, name="turn-loop", daemon=True)
        self._thread.start()
        if library_threads:
            self.run(_limit_anyio_threads(library_threads))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs `coro` in the loop and blocks the calling thread until it is done."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("WorkerLoop.run() called from inside the loop")
        return self.submit(coro).result()

    def redis(self) -> aioredis.Redis:
        """The process's shared async Redis client (its pool hands each caller a connection);
        only to be used from coroutines running in this loop."""
        if self._redis is None:
            self._redis = live.async_client()
        return self._redis

    def watch(self) -> TurnWatch:
        """The process's one poller of Stop flags and heartbeats."""
        if self._watch is None:
            self._watch = TurnWatch(self.redis(), settings.TESSERA["CANCEL_POLL_S"])
        return self._watch

    def in_flight(self) -> int:
        return len(self._watch.turns) if self._watch is not None else 0

    def drain(self, grace_s: float, *, hard_stop_s: float = HARD_STOP_S) -> threading.Thread | None:
        """SIGTERM: Celery stops taking tasks and waits for the running ones; this makes sure
        that wait ends. Turns get `grace_s` to finish; then the rest are stopped and closed as
        interrupted with their partial answers (a second or two). If even that hangs (say, the
        database is gone), the process exits after `hard_stop_s` more: the turns are then
        closed by another worker's reaper, and their messages, never acknowledged, are
        recognised on redelivery and not run again. Called from the signal handler: returns at
        once, the waiting happens on a thread."""
        if self.draining:
            return None
        self.draining = True
        thread = threading.Thread(target=self._drain, args=(grace_s, hard_stop_s), name="drain", daemon=True)
        thread.start()
        return thread

    def _drain(self, grace_s: float, hard_stop_s: float) -> None:
        from core import health, metrics

        metrics.WORKERS_DRAINING.inc()
        health.leave()
        log.info("Shutting down: no new turns; %d running get %g s to finish", self.in_flight(), grace_s)
        deadline = time.monotonic() + grace_s
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = self.in_flight()
        if not left:
            return
        log.warning("Grace period over: closing %d running turns as interrupted", left)
        self.loop.call_soon_threadsafe(self.watch().interrupt_all)
        deadline = time.monotonic() + hard_stop_s
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.in_flight():
            log.error("%d turns did not close within %g s; exiting", self.in_flight(), hard_stop_s)
            logging.shutdown()
            os._exit(1)

    def stop(self) -> None:
        async def close() -> None:
            from toolsets.mcp.client import close_all

            # MCP connections live on this loop: stdio servers are child processes to stop.
            await close_all()
            if self._redis is not None:
                await self._redis.aclose()
            # The providers' HTTP sessions live on this loop too: the fast path's, and those of
            # the clients LiteLLM keeps (one per provider, key and loop). Left open, they would
            # be finalized at interpreter exit, each with an "Unclosed client session" error.
            fast_path = sys.modules.get("agent.openai_stream")
            if fast_path is not None:
                await fast_path.close_sessions()
            litellm = sys.modules.get("litellm")
            if litellm is not None:
                await litellm.close_litellm_async_clients()
            redis_pipe.close()

        try:
            self.submit(close()).result(timeout=5)
        except Exception:  # best effort at shutdown
            log.warning("Closing the worker loop's clients failed", exc_info=True)
        loops.forget(self.loop)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


def _new_loop(use_uvloop: bool) -> asyncio.AbstractEventLoop:
    """asyncio's loop, or uvloop's (libuv: cheaper socket reads and timers per wake-up)."""
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            log.warning("TESSERA_WORKER_UVLOOP is set but uvloop is not installed; using asyncio's loop")
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


async def _limit_anyio_threads(total: int) -> None:
    """LiteLLM hands its CPU-heavy end-of-stream work (rebuilding the whole response from its
    chunks) to threads through anyio. When many turns end together, a few such threads at a time
    finish them as fast as many would, while many would take the GIL from the loop thread and
    hold up the fragments of every turn still streaming (bench/RESULTS.md)."""
    import anyio.to_thread

    anyio.to_thread.current_default_thread_limiter().total_tokens = total


_lock = threading.Lock()
_current: WorkerLoop | None = None
_pid = 0


def get() -> WorkerLoop:
    """The process's loop, started on first use (again after a fork: threads do not survive one)."""
    global _current, _pid
    with _lock:
        if _current is None or _pid != os.getpid():
            _current = WorkerLoop(
                io_threads=int(settings.TESSERA["WORKER_IO_THREADS"]),
                library_threads=int(settings.TESSERA["WORKER_LIBRARY_THREADS"]),
                use_uvloop=bool(settings.TESSERA["WORKER_UVLOOP"]),
            )
            _pid = os.getpid()
        return _current


def shutdown() -> None:
    global _current
    with _lock:
        if _current is not None and _pid == os.getpid():
            _current.stop()
        _current = None


def draining() -> bool:
    """Whether this process got SIGTERM: it starts no new turn."""
    return _current is not None and _pid == os.getpid() and _current.draining
