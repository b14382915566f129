"""`make run`'s process (`manage.py serve`): production-safe defaults, and it keeps Tessera up
when one of its processes dies, without losing what the embedded Redis held."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests import database
from tests.processes import BOOT_S

# Each test boots five processes (web, three workers, beat) on a two-core machine the suite's
# other workers share: minutes at worst, not a hang.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry.name)] = cmdline
    return found


def _child(pid: int, needle: str, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child, cmdline in _children(pid).items():
            if needle in cmdline:
                return child
        time.sleep(0.2)
    raise AssertionError(f"no child process running {needle!r}")


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def served(tmp_path: Path, django_db_setup: None) -> Iterator[tuple[subprocess.Popen[bytes], str, Path, Path]]:
    yield from _serve(tmp_path)


def _serve(tmp_path: Path, **popen: Any) -> Generator[tuple[subprocess.Popen[bytes], str, Path, Path]]:
    # Not the test process's metrics directory either (its settings put it in the environment):
    # `serve` empties the one it is given, and that one holds the session stack's counters, which
    # tests/core/test_metrics.py then saw stand still when it ran after this module in a worker.
    dropped = ("REDIS_URL", "DATABASE_URL", "DEBUG", "PROMETHEUS_MULTIPROC_DIR")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(TESSERA_VAR_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    # `make run` migrates before it serves; the suite's migrated template stands in for that.
    if not database.copy_migrated(tmp_path / "tessera.sqlite3"):
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--concurrency", "2"],
        cwd=ROOT,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - the child process owns it
        stderr=subprocess.STDOUT,
        **popen,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        # Five processes boot at once (web, three workers, beat) on a shared two-core machine.
        _wait(lambda: _answers(url + "/login/"), 150, "the web process")
        yield process, url, log, tmp_path
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def test_serve_restarts_dead_processes_and_keeps_redis_data(served: Any) -> None:
    process, url, log, var = served

    # Debug pages are off unless asked for: a 404 shows no URL list, no settings.
    missing = httpx.get(url + "/no-such-page/")
    assert missing.status_code == 404 and "URLconf" not in missing.text and "DEBUG" not in missing.text
    # Static files are served: the built ones, named by their content and cached for a year.
    assert httpx.get(url + "/static/js/chat.js").status_code == 200
    page = httpx.get(url + "/login/").text
    stylesheet = re.search(r'href="(/static/css/tessera\.[0-9a-f]{12}\.css)"', page)
    assert stylesheet, "the page does not link the built stylesheet"
    cached = httpx.get(url + stylesheet[1], headers={"Accept-Encoding": "gzip"})
    assert cached.headers["Content-Encoding"] == "gzip" and "immutable" in cached.headers["Cache-Control"]

    # Two workers: turns, and reading uploaded files on a queue of their own.
    files_worker = _child(process.pid, "--queues files")
    assert "--concurrency 3" in _children(process.pid)[files_worker]

    # A killed worker is started again; the web process and Redis stay up meanwhile.
    worker = _child(process.pid, "--queues celery")
    os.kill(worker, signal.SIGKILL)
    _wait(lambda: "The worker exited (signal 9); restarting it" in log.read_text(), 60, "the restart notice")
    assert _answers(url + "/login/")
    _wait(
        lambda: any("--queues celery" in c for p, c in _children(process.pid).items() if p != worker),
        BOOT_S,
        "a new worker",
    )
    assert _child(process.pid, "--queues files") == files_worker  # untouched

    # A killed web process too.
    web = _child(process.pid, "config.web")
    os.kill(web, signal.SIGKILL)
    _wait(lambda: "The web process exited (signal 9)" in log.read_text(), 60, "the web restart notice")
    _wait(lambda: _answers(url + "/login/"), BOOT_S, "the web process to answer again")

    # The embedded Redis keeps its data across a crash of its own (append-only file).
    sock = var / "redis" / "redis.sock"
    client = redis.Redis(unix_socket_path=str(sock))
    client.set("tessera:test:kept", "yes")
    time.sleep(1.5)  # the append-only file is synced every second
    os.kill(_child(process.pid, "redis-server"), signal.SIGKILL)
    _wait(lambda: "The embedded Redis exited" in log.read_text(), 60, "the Redis restart notice")

    def kept() -> bool:
        try:
            return redis.Redis(unix_socket_path=str(sock), socket_timeout=1).get("tessera:test:kept") == b"yes"
        except redis.RedisError:
            return False

    _wait(kept, 60, "Redis to come back with its data")
    assert process.poll() is None

    # SIGTERM stops everything, Redis last.
    children = _children(process.pid)
    process.terminate()
    assert process.wait(timeout=40) == 0
    for child in children:
        assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()


@pytest.mark.parametrize("when", ["starting", "ready"])
def test_ctrl_c_stops_everything_without_a_traceback(tmp_path: Path, when: str, django_db_setup: None) -> None:
    """Ctrl-C in `make run`'s terminal (SIGINT to the terminal's process group), while the web
    process and the worker are still starting up, or once they are ready."""
    serving = _serve(tmp_path, start_new_session=True)
    process, url, log, _ = next(serving)
    try:
        if when == "ready":
            _wait(lambda: httpx.get(url + "/readyz", timeout=2).status_code == 200, 90, "the worker to be ready")
        else:
            # A web process started afresh is still importing Django and the app (seconds) when
            # the signal comes.
            os.kill(_child(process.pid, "config.web"), signal.SIGKILL)
            _wait(lambda: "Restarting the web process." in log.read_text(), 60, "the restart")
        children = _children(process.pid)
        os.killpg(process.pid, signal.SIGINT)
        # Four processes (web, turn, files and sandbox workers) may all be mid start-up on two
        # cores; each Celery worker finishes booting before it honours its warm shutdown.
        assert process.wait(timeout=120) == 0
        for child in children:
            assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()
    finally:
        serving.close()
    output = log.read_text(errors="replace")
    if when == "ready":
        assert "Warm shutdown" in output  # the worker did stop gracefully
    assert "Traceback" not in output and "Exception ignored" not in output, output[-3000:]
