"""The command lines of Tessera's two kinds of process, shared by `manage.py serve`, the tests
and the benchmark so they all run the stack the same way."""

from __future__ import annotations

import sys


def worker_command(*, concurrency: int | str, hostname: str, queues: tuple[str, ...] = ()) -> list[str]:
    """A Celery worker. Without `queues` it consumes every queue (turns and file reading); the
    names select some (config/settings.py, CELERY_TASK_QUEUES)."""
    # Threads, not prefork: a turn mostly waits on the provider, so one process carries many.
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker",
        "--pool", "threads", "--concurrency", str(concurrency), "--loglevel", "INFO",
        "--without-gossip", "--without-mingle", "--hostname", hostname,
    ]  # fmt: skip
    return [*command, "--queues", ",".join(queues)] if queues else command


def beat_command() -> list[str]:
    """Celery beat with RedBeat's scheduler (config/settings.py): its entries (the automations'
    tick and the knowledge refresh) and a lock in Redis, so no schedule file, and a second beat
    waits as a standby. What is due lives in the database (automations/)."""
    return [sys.executable, "-m", "celery", "-A", "config", "beat", "--scheduler", "redbeat.RedBeatScheduler",
            "--loglevel", "INFO"]  # fmt: skip


def web_command(*, host: str, port: int | str) -> list[str]:
    # Daphne, with compression on the sockets (config/web.py).
    return [sys.executable, "-m", "config.web", "-b", host, "-p", str(port), "config.asgi:application"]
