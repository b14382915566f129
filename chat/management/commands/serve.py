"""`manage.py serve`: Daphne, a Celery worker for turns, a small one for reading uploaded files
(its own queue: one user's uploads never hold anyone's answers) and one for code sandboxes (its
own queue too), one Celery beat for the automations' schedules, plus the embedded Redis when REDIS_URL is unset.

This process supervises them: a process that dies (a crash, an OOM kill, someone's `kill -9`)
is started again after a short backoff, and the others keep running, so a dead worker costs the
turns it was running and nothing else (the reaper in the new worker closes those as
interrupted). Ctrl-C, SIGTERM or a closed terminal stops the web and worker processes first and
Redis last; the worker is given its grace period (WORKER_SHUTDOWN_GRACE_S) to finish its turns.

The host's metrics directory is emptied at start: the processes it starts write there afresh.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from core import embedded_redis
from core.processes import beat_command, web_command, worker_command
from sandbox.protocol import direct_queue

# A process that keeps dying is restarted less and less often, up to this many seconds apart.
MAX_BACKOFF_S = 30.0
# A process that ran this long before dying is considered healthy again: the backoff restarts.
HEALTHY_AFTER_S = 60.0


@dataclass
class Supervised:
    name: str
    start: Callable[[], subprocess.Popen[bytes] | None]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    log: Callable[[str], None] = field(default=print)

    def launch(self) -> None:
        self.process = self.start()
        self.started_at = time.monotonic()
        self.restart_at = None

    def check(self, now: float) -> None:
        """Restarts the process if it died and its backoff has passed."""
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.log(f"Restarting the {self.name}.")
                try:
                    self.launch()
                except Exception as exc:  # e.g. Redis failing to start: try again later
                    self.failures += 1
                    self.restart_at = now + min(MAX_BACKOFF_S, 0.5 * 2 ** (self.failures - 1))
                    self.log(f"Could not start the {self.name}: {exc}")
            return
        if self.process is None or self.process.poll() is None:
            return
        code = self.process.returncode
        self.failures = 1 if now - self.started_at > HEALTHY_AFTER_S else self.failures + 1
        delay = min(MAX_BACKOFF_S, 0.5 * 2 ** (self.failures - 1))
        reason = f"signal {-code}" if code < 0 else f"code {code}"
        self.log(f"The {self.name} exited ({reason}); restarting it in {delay:g} s.")
        self.restart_at = now + delay

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Command(BaseCommand):
    help = "Run Tessera: Daphne (web + websockets) and a Celery worker, restarted if they die."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
        parser.add_argument("--concurrency", default=os.environ.get("WORKER_CONCURRENCY", "64"))
        parser.add_argument("--no-worker", action="store_true", help="Only the web process.")

    def say(self, text: str) -> None:
        self.stderr.write(text)
        self.stderr.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        embedded = not os.environ.get("REDIS_URL")
        # Metrics files of an earlier run's processes (the web process adds them all up).
        for stale in settings.METRICS_DIR.glob("*.db"):
            stale.unlink(missing_ok=True)
        env = {**os.environ, "REDIS_URL": settings.REDIS_URL}
        stopping = False

        def shutdown(*_: Any) -> None:
            nonlocal stopping
            stopping = True

        # The processes below get none of these from the terminal (each is a process group of its
        # own): this process stops them in order, and a closed terminal (SIGHUP) stops them too.
        signal.signal(signal.SIGINT, shutdown)
        signal.signal(signal.SIGTERM, shutdown)
        signal.signal(signal.SIGHUP, shutdown)

        processes: list[Supervised] = []
        redis: Supervised | None = None
        if embedded:
            redis = Supervised("embedded Redis", lambda: _start_redis(), log=self.say)
            redis.launch()
            self.stdout.write(f"Embedded Redis on {settings.EMBEDDED_REDIS_SOCKET}")
        if not options["no_worker"]:
            hostname = f"tessera@%h-{os.getpid()}"
            turns = worker_command(concurrency=options["concurrency"], hostname=hostname, queues=(settings.TURN_QUEUE,))
            processes.append(Supervised("worker", lambda: _spawn(turns, env), log=self.say))
            files = worker_command(
                concurrency=settings.FILES_WORKER_CONCURRENCY,
                hostname=f"tessera-files@%h-{os.getpid()}",
                queues=(settings.FILES_QUEUE,),
            )
            processes.append(Supervised("files worker", lambda: _spawn(files, env), log=self.say))
            # Code sandboxes: the shared queue, and this worker's own for the sessions it holds.
            node = f"tessera-sandbox@{socket.gethostname()}-{os.getpid()}"
            sandboxes = worker_command(
                concurrency=settings.SANDBOX_WORKER_CONCURRENCY,
                hostname=node,
                queues=(settings.SANDBOX_QUEUE, direct_queue(settings.SANDBOX_QUEUE, node)),
            )
            processes.append(Supervised("sandbox worker", lambda: _spawn(sandboxes, env), log=self.say))
            # Beat sends the automations' tick (automations/scheduler.py). What is due is in the
            # database, so a restart loses nothing; its lock in Redis (RedBeat) makes a beat on
            # another host wait rather than send too.
            processes.append(Supervised("beat", lambda: _spawn(beat_command(), env), log=self.say))
        web = web_command(host=options["host"], port=options["port"])
        processes.append(Supervised("web process", lambda: _spawn(web, env), log=self.say))
        try:
            for process in processes:
                process.launch()
            self.stdout.write(self.style.SUCCESS(f"Tessera is running at http://{options['host']}:{options['port']}/"))
            self.stdout.flush()
            while not stopping:
                now = time.monotonic()
                for process in [redis, *processes] if redis else processes:
                    process.check(now)
                time.sleep(0.3)
        finally:
            for process in processes:
                process.stop()
            # The worker may take its grace period, and a little more to save what it streamed.
            for process in processes:
                process.wait(timeout=float(settings.WORKER_SHUTDOWN_GRACE_S) + 20)
            if redis is not None and redis.process is not None:
                embedded_redis.stop(redis.process)


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # A process group of its own (as the embedded Redis has), so Ctrl-C in the terminal reaches
    # only this process, which stops the others with SIGTERM. Signalled by the terminal itself, a
    # web process still starting up died with a KeyboardInterrupt traceback.
    return subprocess.Popen(command, env=env, process_group=0)


def _start_redis() -> subprocess.Popen[bytes] | None:
    # None: a server from an earlier run still answers on the socket, and is used as it is.
    return embedded_redis.start(settings.EMBEDDED_REDIS_SOCKET)
