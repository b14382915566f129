"""Tessera scaled out: two web processes and two workers on one database and one Redis, as a
deployment behind a load balancer runs them, for tests that restart, kill and pin them.

The processes are started by `tests.processes` (the command lines of `core.processes`). Which
workers run is the `WORKERS` list: a worker of its own queues (say, a file-reading worker once
file reading leaves the turn queue) is one more `WorkerRole` there.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from django.conf import settings

from tests.processes import Processes, free_port, wait_until

# The queue turns are sent to: Celery's default (no task is routed elsewhere).
TURN_QUEUE = "celery"
# What the processes leave in Redis: Tessera's keys and Celery's (queues, unacknowledged tasks,
# remote-control mailboxes). Removed before and after, since a run may have been cut short.
KEY_PATTERNS = ("tessera:*", "celery*", "_kombu*", "unacked*")


@dataclass(frozen=True)
class WorkerRole:
    """One worker process: its name and the queues it takes tasks from (none: Celery's default)."""

    name: str
    queues: tuple[str, ...] = ()
    concurrency: int = 8

    @property
    def options(self) -> list[str]:
        return ["-Q", ",".join(self.queues)] if self.queues else []

    @property
    def runs_turns(self) -> bool:
        return not self.queues or TURN_QUEUE in self.queues


WEBS = ("web-1", "web-2")
WORKERS = (WorkerRole("worker-1"), WorkerRole("worker-2"))


class Cluster:
    """The processes by name, each started again by `ensure_running()` if a test ended it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # Every process shares the test process's Redis and database (the test's rows are theirs).
        self.processes = Processes(folder, redis_url=settings.REDIS_URL)
        # One record per line, so a test can tell which worker ran a turn.
        self.processes.env["LOG_FORMAT"] = "json"
        self.ports = {name: free_port() for name in WEBS}
        self.roles = {role.name: role for role in WORKERS}
        self.webs: dict[str, subprocess.Popen[bytes]] = {}
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.celery = self.processes.broker()

    def url(self, web: str) -> str:
        return f"http://127.0.0.1:{self.ports[web]}"

    # --- starting and stopping --------------------------------------------------------------
    def start(self) -> None:
        forget_keys(self.processes.redis_url)
        # All of them import at once; then each is waited for.
        for name in self.roles:
            self._spawn_worker(name)
        for name in WEBS:
            self.start_web(name, wait=False)
        for name in WEBS:
            self._wait_for_web(name)
        for name in self.roles:
            self._wait_for_worker(name)

    def start_web(self, name: str, *, wait: bool = True) -> None:
        self.webs[name] = self.processes.web(self.ports[name], name=name, wait=False)
        if wait:
            self._wait_for_web(name)

    def _wait_for_web(self, name: str) -> None:
        try:
            self.processes.wait_for_web(self.ports[name], self.webs[name])
        except (RuntimeError, AssertionError) as exc:
            raise RuntimeError(f"{name}: {exc}\n{self.log_tail(name, banner=True)}") from exc

    def start_worker(self, name: str) -> None:
        self._spawn_worker(name)
        self._wait_for_worker(name)

    def _spawn_worker(self, name: str) -> None:
        role = self.roles[name]
        self.workers[name] = self.processes.worker(name, concurrency=role.concurrency, options=role.options)

    def _wait_for_worker(self, name: str) -> None:
        process, node = self.workers[name], self.processes.nodenames[name]

        def answers() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{self.log_tail(name, banner=True)}")
            return bool(self.celery.control.ping(destination=[node], timeout=0.5))

        wait_until(answers, 60, f"{name} did not answer")

    def restart_web(self, name: str) -> None:
        """SIGTERM (what an orchestrator sends on a rolling restart), then the same port again."""
        process = self.webs[name]
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
        assert code == 0, f"{name} exited with {code}:\n{self.log_tail(name)}"
        self.start_web(name)

    def kill_worker(self, name: str) -> None:
        process = self.workers[name]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def ensure_running(self) -> None:
        """Starts again whatever a test ended, and gives every turn worker its queue back."""
        for name, process in self.webs.items():
            if process.poll() is not None:
                self.start_web(name)
        for name, process in self.workers.items():
            if process.poll() is not None:
                self.start_worker(name)
        self._consume(self.turn_workers(), True)

    def close(self) -> None:
        self.processes.close()
        self.celery.close()
        forget_keys(self.processes.redis_url)

    # --- where turns run ------------------------------------------------------------------
    def turn_workers(self) -> list[str]:
        return [name for name, role in self.roles.items() if role.runs_turns]

    @contextmanager
    def pinned(self, worker: str) -> Iterator[None]:
        """Turns sent meanwhile run on `worker`: the other turn workers stop taking from the
        turn queue (Celery's remote control) until the block ends."""
        others = [name for name in self.turn_workers() if name != worker]
        self._consume(others, False)
        try:
            yield
        finally:
            self._consume([name for name in others if self.workers[name].poll() is None], True)

    def _consume(self, workers: list[str], on: bool) -> None:
        if not workers:
            return
        nodes = [self.processes.nodenames[name] for name in workers]
        command = self.celery.control.add_consumer if on else self.celery.control.cancel_consumer
        replies = command(TURN_QUEUE, destination=nodes, reply=True, timeout=5)
        assert len(replies) == len(nodes), f"{'add' if on else 'cancel'}_consumer answered by {replies}"

    def records(self, name: str) -> list[dict[str, Any]]:
        """A process's log records, every run of it (a restarted process appends)."""
        path = self.processes.log(name)
        found = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                record = json.loads(line)
            except ValueError:  # Celery's banner lines, or a record being written as we read
                continue
            if isinstance(record, dict):
                found.append(record)
        return found

    def ran(self, turn_id: int) -> list[str]:
        """The workers that started the turn."""
        return [
            name
            for name in self.roles
            if any(r.get("message") == "Turn started" and r.get("turn_id") == turn_id for r in self.records(name))
        ]

    def log_tail(self, name: str, lines: int = 30, *, banner: bool = False) -> str:
        """The last records of a process; with `banner`, what it printed too (Celery's start-up
        banner, a failed start's traceback)."""
        paths = [self.processes.log(name), *([self.folder / f"{name}.out"] if banner else [])]
        return "".join(
            "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n" for path in paths if path.exists()
        )

    def names(self) -> list[str]:
        return [*WEBS, *self.roles]


def forget_keys(url: str) -> None:
    client = redis.from_url(url)
    try:
        for pattern in KEY_PATTERNS:
            keys = list(client.scan_iter(pattern))
            if keys:
                client.delete(*keys)
    finally:
        client.close()
