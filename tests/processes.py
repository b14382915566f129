"""Tessera's processes started by a test on its own: a Redis, web and worker processes the test
may stop, kill or restart (the session's `stack` is shared and must stay up)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from celery.utils.nodenames import host_format
from django.conf import settings

from core import embedded_redis
from core.processes import web_command, worker_command

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return (
        f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}"
        f"/{db['NAME']}"
    )


# How long a process of the suite's own (a web process, a Celery worker, a beat) may take to
# start: seconds on a quiet machine, minutes on a two-core one whose cores the suite's other
# workers, their browsers and their stacks keep busy. Only a hang reaches it.
BOOT_S = 180
# The time limit of a test that starts processes (the `integration` mark) or uses the session's
# stack (whose start-up falls within the first test that asks for it), where it sets none.
PROCESS_TEST_TIMEOUT_S = 300


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} within {timeout} s")


class Processes:
    """Started processes, each stopped at the end whatever the test did to it."""

    def __init__(self, folder: Path, redis_url: str | None = None) -> None:
        """With `redis_url`, the processes share that Redis (the session's); else they get one
        of their own, started by `start_redis()`."""
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.redis_socket = folder / "redis" / "redis.sock"
        self.redis_url = redis_url or f"unix://{self.redis_socket}"
        self.redis: subprocess.Popen[bytes] | None = None
        self.started: list[subprocess.Popen[bytes]] = []
        # A worker's name in Celery (for remote control), by the name it was started with.
        self.nodenames: dict[str, str] = {}
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": self.redis_url,
            "PYTHONUNBUFFERED": "1",
            # Its own metrics directory: what this test's processes count, and nothing else.
            "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
        }

    def start_redis(self) -> None:
        self.redis = embedded_redis.start(self.redis_socket)

    def stop_redis(self) -> None:
        embedded_redis.stop(self.redis)
        self.redis = None

    def log(self, name: str) -> Path:
        return self.folder / f"{name}.log"

    def spawn(self, command: list[str], name: str, **env: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**self.env, **env},
            # Log records go to standard error; Celery's banner and notices to standard output.
            stdout=open(self.folder / f"{name}.out", "ab"),  # noqa: SIM115 - the child process owns it
            stderr=open(self.log(name), "ab"),  # noqa: SIM115
        )
        self.started.append(process)
        return process

    def worker(
        self, name: str = "worker", *, concurrency: int = 8, options: Sequence[str] = (), **env: str
    ) -> subprocess.Popen[bytes]:
        """A worker named `name` in Celery (see `nodenames`); `options` are more of Celery's
        worker options (say, `-Q files` for a worker of one queue)."""
        self.nodenames[name] = host_format(f"{name}-{free_port()}@%h")
        return self.spawn(
            [*worker_command(concurrency=concurrency, hostname=self.nodenames[name]), *options], name, **env
        )

    def web(self, port: int, name: str = "web", *, wait: bool = True, **env: str) -> subprocess.Popen[bytes]:
        """A web process on `port`; with `wait`, once it answers (else see `wait_for_web`)."""
        process = self.spawn(web_command(host="127.0.0.1", port=port), name, **env)
        if wait:
            self.wait_for_web(port, process)
        return process

    def wait_for_web(self, port: int, process: subprocess.Popen[bytes]) -> None:
        url = f"http://127.0.0.1:{port}/healthz"
        wait_until(lambda: _answers(url, process), BOOT_S, "the web process did not answer")

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
        for process in self.started:
            process.wait(timeout=10)
        if self.redis is not None:
            self.stop_redis()

    def client(self) -> Any:
        import redis

        return redis.from_url(self.redis_url, socket_timeout=2)

    def broker(self) -> Any:
        """A Celery app sending to these processes' Redis (the test process's own app sends to
        the session's)."""
        from celery import Celery

        url = self.redis_url
        broker = "redis+socket://" + url.removeprefix("unix://") if url.startswith("unix://") else url
        # Not the current app: tasks sent later by the test process must keep going to the session's Redis.
        return Celery("tests", broker=broker, set_as_current=False)

    def worker_alive(self) -> bool:
        """Whether a worker on this Redis sent a heartbeat lately (what /readyz looks for)."""
        from core.health import WORKERS_KEY

        client = self.client()
        try:
            return bool(client.zcount(WORKERS_KEY, time.time() - 30, "+inf"))
        finally:
            client.close()


def _answers(url: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"the process exited with {process.returncode}")
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
