"""`manage.py serve`: Daphne and a Celery worker, plus the embedded Redis when REDIS_URL is unset.

This process owns the embedded Redis: it starts it first, stops the web and worker processes
on Ctrl-C or SIGTERM, and stops Redis last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from config import embedded_redis
from config.processes import web_command, worker_command


class Command(BaseCommand):
    help = "Run Tessera: Daphne (web + websockets) and a Celery worker."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", default=os.environ.get("PORT", "8000"))
        parser.add_argument("--concurrency", default=os.environ.get("WORKER_CONCURRENCY", "64"))
        parser.add_argument("--no-worker", action="store_true", help="Only the web process.")

    def handle(self, *args: Any, **options: Any) -> None:
        redis_process = None
        if not os.environ.get("REDIS_URL"):
            redis_process = embedded_redis.start(settings.EMBEDDED_REDIS_SOCKET)
            self.stdout.write(f"Embedded Redis on {settings.EMBEDDED_REDIS_SOCKET}")
        env = {**os.environ, "REDIS_URL": settings.REDIS_URL}
        children: list[subprocess.Popen[bytes]] = []
        stopping = False

        def shutdown(*_: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, shutdown)
        signal.signal(signal.SIGTERM, shutdown)
        try:
            if not options["no_worker"]:
                children.append(
                    subprocess.Popen(
                        worker_command(concurrency=options["concurrency"], hostname=f"tessera@%h-{os.getpid()}"),
                        env=env,
                    )
                )
            children.append(
                subprocess.Popen(
                    web_command(host=options["host"], port=options["port"]),
                    env=env,
                )
            )
            self.stdout.write(self.style.SUCCESS(f"Tessera is running at http://{options['host']}:{options['port']}/"))
            while not stopping:
                for child in children:
                    if child.poll() is not None:
                        self.stderr.write(f"A process exited with code {child.returncode}; stopping.")
                        stopping = True
                time.sleep(0.3)
        finally:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
            embedded_redis.stop(redis_process)
