"""The systemd units under deploy/ are a tested example: their commands are run here as systemd
would run them (environment file, specifiers, working directory), against this test's database
and a Redis of its own; then each process is sent its unit's KillSignal and must stop within
its unit's TimeoutStopSec."""

from __future__ import annotations

import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from chat.worker.loop import HARD_STOP_S
from core.processes import worker_command
from tests.processes import BOOT_S, Processes, free_port, wait_until

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
INSTALLED = "/opt/tessera"


def unit(name: str) -> dict[str, list[str]]:
    """A unit file's [Service] (and other) keys, each with all its values in order."""
    found: dict[str, list[str]] = {}
    for raw in (DEPLOY / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found


def env_file() -> dict[str, str]:
    values = {}
    for raw in (DEPLOY / "tessera.env.example").read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key] = value
    return values


def command(line: str, env: dict[str, str], instance: str) -> list[str]:
    """An ExecStart line as systemd runs it: specifiers, then ${VAR} from the environment."""
    line = line.replace("%i", instance).replace("%H", socket.gethostname())
    args = shlex.split(line)
    args = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], arg) for arg in args]
    # The installed venv's interpreter is this one; the installed tree is this checkout.
    return [sys.executable if arg == f"{INSTALLED}/.venv/bin/python" else arg for arg in args]


def test_the_units_run_and_stop_as_written(tmp_path: Path, django_db_setup: Any, django_db_blocker: Any) -> None:
    own = Processes(tmp_path)
    own.start_redis()
    env = {
        **own.env,
        **env_file(),
        # Where this test's database, Redis and data live instead of the example's.
        "DATABASE_URL": own.env["DATABASE_URL"],
        "REDIS_URL": own.env["REDIS_URL"],
        "TESSERA_VAR_DIR": str(tmp_path / "var"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "var" / "metrics"),
    }
    prepare, web_unit, worker_unit, files_unit = (
        unit("tessera-prepare.service"),
        unit("tessera-web@.service"),
        unit("tessera-worker@.service"),
        unit("tessera-files@.service"),
    )
    for service in (prepare, web_unit, worker_unit, files_unit):
        assert service["WorkingDirectory"] == [INSTALLED]
        assert service["EnvironmentFile"] == ["/etc/tessera/tessera.env"]
    # A leftover metrics file of a process from an earlier start.
    metrics_dir = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    metrics_dir.mkdir(parents=True)
    stale = metrics_dir / "gauge_livesum_999999.db"
    stale.write_bytes(b"\0" * 16)
    try:
        for line in prepare["ExecStart"]:
            done = subprocess.run(command(line, env, ""), cwd=ROOT, env=env, capture_output=True, timeout=120)
            assert done.returncode == 0, (line, done.stderr.decode()[-2000:])
        assert not stale.exists()

        port = free_port()
        (web_line,) = web_unit["ExecStart"]
        (worker_line,) = worker_unit["ExecStart"]
        (files_line,) = files_unit["ExecStart"]
        # The workers run as `manage.py serve` runs them (core/processes.py): one for turns,
        # one for reading files.
        args = command(worker_line, env, "1")
        files_args = command(files_line, env, "1")
        assert args[:8] == worker_command(concurrency=1, hostname="x")[:8] and args[-2:] == ["--queues", "celery"]
        expected = worker_command(concurrency=env["TESSERA_FILES_WORKER_CONCURRENCY"], hostname="x", queues=("files",))
        assert files_args[:-4] == expected[:-4] and files_args[-2:] == ["--queues", "files"]
        web = own.spawn(command(web_line, env, str(port)), "web", **env)
        worker = own.spawn(args, "worker", **env)
        files = own.spawn(files_args, "files", **env)
        base = f"http://127.0.0.1:{port}"
        # The example's host name, as a balancer would send it.
        headers = {"Host": env["ALLOWED_HOSTS"].split(",")[0]}

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/readyz", headers=headers, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 90, "the units' processes did not become ready")
        token = {"Authorization": f"Bearer {env['METRICS_TOKEN']}", **headers}
        assert httpx.get(f"{base}/metrics", headers=token, timeout=5).status_code == 200
        assert httpx.get(f"{base}/metrics", headers=headers, timeout=5).status_code == 401

        # Each process stops on its unit's signal, within its unit's timeout.
        grace = float(env["TESSERA_WORKER_SHUTDOWN_GRACE_S"])
        assert float(worker_unit["TimeoutStopSec"][0]) >= grace + HARD_STOP_S + 5
        broker = own.broker()

        def both_workers() -> dict[str, list[str]] | None:
            replies = broker.control.inspect(timeout=1).active_queues() or {}
            found = {name.split("@")[0]: sorted(q["name"] for q in queues) for name, queues in replies.items()}
            return found if len(found) == 2 else None

        assert wait_until(both_workers, BOOT_S, "both workers did not answer") == {
            "tessera-1": ["celery"],
            "tessera-files-1": ["files"],
        }
        for process, service in ((web, web_unit), (worker, worker_unit), (files, files_unit)):
            started = time.monotonic()
            process.send_signal(getattr(signal, service["KillSignal"][0]))
            assert process.wait(timeout=float(service["TimeoutStopSec"][0])) == 0
            assert time.monotonic() - started < float(service["TimeoutStopSec"][0])
    finally:
        own.close()
