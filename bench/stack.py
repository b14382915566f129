"""The stack under test, started the way tests/conftest.py starts it: a Redis server, a fresh
SQLite database in a temp directory, Daphne and one Celery worker as subprocesses.

Also here: the fake provider's process. The processes' CPU and RSS are measured by bench/meter.py.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from core.processes import web_command

from .profiler import PerfRecorder

ROOT = Path(__file__).resolve().parent.parent


# --- processes ------------------------------------------------------------------------------
@dataclass
class StackConfig:
    pool: str = "threads"
    concurrency: int = 256
    window_ms: int = 50
    capacity: int = 1000
    redis_url: str | None = None
    users: int = 8
    layer: str = "pubsub"  # or "redis": TESSERA_CHANNEL_LAYER
    gc_freeze: bool = False  # experiment: gc.freeze() in the worker once started (bench/settings.py)
    litellm_httpx: bool = False  # experiment: LiteLLM's httpx transport in the worker (bench/settings.py)
    fast_path: bool = True  # TESSERA_FAST_PATH: Tessera's own reader for the (OpenAI-compatible) fake provider
    uvloop: bool = False  # TESSERA_WORKER_UVLOOP
    profile: str = ""  # "perf" or "cprofile": see bench.profiler
    profile_dir: Path = ROOT / "bench" / "results"
    keep: bool = False
    # As `manage.py serve` runs them: turns on one worker, uploaded files read by one of their
    # own. False: one worker consumes both queues (the fairness scenario's comparison).
    files_worker: bool = True


class StackError(RuntimeError):
    pass


class Stack:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self.dir = Path(tempfile.mkdtemp(prefix="tessera-bench-"))
        self.var = self.dir / "var"
        self.logs = self.dir / "logs"
        self.logs.mkdir(parents=True)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.redis_process: subprocess.Popen[bytes] | None = None
        self.provider: subprocess.Popen[str] | None = None
        self.provider_url = ""
        self.web: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.files_worker: subprocess.Popen[bytes] | None = None
        self.redis_pid: int | None = None
        self.setup: dict[str, Any] = {}
        if config.redis_url:
            self.redis_url = config.redis_url
        else:
            self.redis_socket = self.dir / "redis" / "redis.sock"
            self.redis_url = f"unix://{self.redis_socket}"
        self.recorder = PerfRecorder(config.profile_dir) if config.profile == "perf" else None
        self.password = secrets.token_urlsafe(12)
        self.secret = "bench-" + secrets.token_hex(16)

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://")

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "TESSERA_CHANNEL_LAYER": self.config.layer,
            "BENCH_GC_LOG": str(self.logs / "gc"),
            "BENCH_TRACE": str(self.logs / "trace"),
            "BENCH_GC_FREEZE": "1" if self.config.gc_freeze else "",
            "BENCH_LITELLM_HTTPX": "1" if self.config.litellm_httpx else "",
            "TESSERA_VAR_DIR": str(self.var),
            "DATABASE_URL": f"sqlite:///{self.dir / 'bench.sqlite3'}",
            "REDIS_URL": self.redis_url,
            # Production-like: no debug toolbar of any kind, no query log in the worker.
            "DEBUG": "false",
            "SECRET_KEY": self.secret,
            "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "TESSERA_STREAM_WINDOW_MS": str(self.config.window_ms),
            "TESSERA_FAST_PATH": "true" if self.config.fast_path else "false",
            "TESSERA_WORKER_UVLOOP": "true" if self.config.uvloop else "false",
            "CHANNEL_CAPACITY": str(self.config.capacity),
            # Logging in hundreds of users must not be what the benchmark measures.
            "TESSERA_FAST_PASSWORD_HASHER": "true",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }

    def start(self) -> None:
        self._start_redis()
        self._start_provider()
        # Neither process touches the database before its first request or task, so the
        # migration runs while they import (seconds saved: the smoke run must stay short).
        self.worker = self._spawn("worker", self._worker_command())
        if self.config.files_worker:
            from core.processes import worker_command

            files = worker_command(concurrency=3, hostname=f"bench-files-{self.port}@%h", queues=("files",))
            self.files_worker = self._spawn("files", files)
        self.web = self._spawn("web", web_command(host="127.0.0.1", port=self.port))
        self.setup = self.django(
            "setup",
            "--users",
            str(self.config.users),
            # One argument with "=": a random password may start with "-".
            f"--password={self.password}",
            "--api-base",
            f"{self.provider_url}/v1",
        )
        self._wait_for_web()
        self._wait_for_worker()

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        env = self.env
        if self.config.profile == "cprofile":
            out = self.config.profile_dir / f"profile-{name}"
            command = [sys.executable, "-m", "bench.profiler", "--out", str(out), "--", *command[1:]]
        elif self.config.profile == "perf":
            env["PYTHONPERFSUPPORT"] = "1"  # Python functions get symbols perf can read
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=open(self.logs / f"{name}.log", "wb"),
            stderr=subprocess.STDOUT,
        )

    def _worker_command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            self.config.pool,
            "--concurrency",
            str(self.config.concurrency),
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            f"bench-{self.port}@%h",
            *(["--queues", "celery"] if self.config.files_worker else []),
        ]

    def _start_redis(self) -> None:
        import redis

        if self.config.redis_url:
            client = redis.from_url(self.redis_url)
            # A fresh database restarts ids at 1: stale live state, groups or queued turns
            # from an earlier run would be taken for this run's. Only Tessera's and Celery's keys.
            for pattern in ("tessera:*", "celery*", "_kombu*", "unacked*"):
                keys = list(client.scan_iter(pattern))
                if keys:
                    client.delete(*keys)
            self.redis_pid = None
            return
        from core import embedded_redis

        self.redis_process = embedded_redis.start(self.redis_socket)
        self.redis_pid = self.redis_process.pid if self.redis_process else None

    def _start_provider(self) -> None:
        self.provider = subprocess.Popen(
            [sys.executable, "-m", "bench.fake_provider"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=open(self.logs / "provider.log", "wb"),  # noqa: SIM115 - the child owns it
            text=True,
        )
        assert self.provider.stdout is not None
        line = self.provider.stdout.readline().strip()
        if not line.startswith("PORT "):
            raise StackError(f"fake provider did not start: {line!r}")
        self.provider_url = f"http://127.0.0.1:{line.split()[1]}"

    def _wait_for_web(self, timeout: float = 90) -> None:
        assert self.web is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.web.poll() is not None:
                raise StackError(f"daphne exited with {self.web.returncode}:\n{self.log_tail('web')}")
            try:
                httpx.get(f"{self.url}/login/", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise StackError(f"daphne did not answer within {timeout} s")

    def _wait_for_worker(self, timeout: float = 90) -> None:
        from celery import Celery

        assert self.worker is not None
        broker = self.redis_url
        if broker.startswith("unix://"):
            broker = "redis+socket://" + broker.removeprefix("unix://")
        app = Celery(broker=broker)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.worker.poll() is not None:
                    raise StackError(f"worker exited with {self.worker.returncode}:\n{self.log_tail('worker')}")
                if app.control.ping(timeout=0.5):
                    return
            raise StackError(f"the Celery worker did not answer within {timeout} s")
        finally:
            app.close()

    def django(self, *args: str) -> dict[str, Any]:
        """Runs a bench.djtasks command against this stack's database; returns its JSON answer."""
        done = subprocess.run(
            [sys.executable, "-m", "bench.djtasks", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise StackError(f"bench.djtasks {args[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def profile_start(self, label: str) -> None:
        """Starts profiling web and worker for one scenario (see bench.profiler)."""
        if self.recorder is not None:
            pids = self.pids()
            self.recorder.start(label, {"web": pids["web"], "worker": pids["worker"]})
            time.sleep(0.5)  # perf needs a moment to attach to every thread
        elif self.config.profile == "cprofile":
            self._control("reset")

    def profile_stop(self, label: str) -> None:
        if self.recorder is not None:
            self.recorder.stop()
        elif self.config.profile == "cprofile":
            self._control(f"dump {label}")

    def _control(self, command: str) -> None:
        controls = [self.config.profile_dir / f"profile-{name}.ctl" for name in ("web", "worker")]
        for control in controls:
            control.write_text(command)
        deadline = time.monotonic() + 10
        while any(c.exists() for c in controls) and time.monotonic() < deadline:
            time.sleep(0.05)

    def gc_pauses(self, since: float, until: float) -> dict[str, dict[str, float]]:
        """Garbage-collector pauses of 2 ms or more in web and worker between two monotonic
        times (logged by bench/settings.py)."""
        found: dict[str, dict[str, float]] = {}
        for name, process in (("web", self.web), ("worker", self.worker)):
            if process is None:
                continue
            pauses = []
            path = self.logs / f"gc-{process.pid}.log"
            if path.exists():
                for line in path.read_text().splitlines():
                    at, _generation, pause_ms, _collected = line.split()
                    if since <= float(at) <= until:
                        pauses.append(float(pause_ms))
            found[name] = {
                "count": len(pauses),
                "max_ms": max(pauses, default=0.0),
                "total_ms": round(sum(pauses), 1),
            }
        return found

    def pids(self) -> dict[str, int]:
        found = {"bench": os.getpid()}
        if self.web:
            found["web"] = self.web.pid
        if self.worker:
            found["worker"] = self.worker.pid
        if self.files_worker:
            found["files"] = self.files_worker.pid
        if self.provider:
            found["provider"] = self.provider.pid
        if self.redis_pid:
            found["redis"] = self.redis_pid
        return found

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self.web, self.worker, self.provider))

    def stop(self) -> None:
        processes = [p for p in (self.web, self.worker, self.files_worker, self.provider) if p is not None]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                # A threads-pool worker finishes its running tasks on SIGTERM: give it time.
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self.recorder is not None:
            print("Writing perf profiles …", flush=True)
            for path in self.recorder.report():
                print(f"  {path}")
            for profiled in (self.web, self.worker):
                if profiled is not None:
                    Path(f"/tmp/perf-{profiled.pid}.map").unlink(missing_ok=True)
        if self.redis_process is not None:
            from core import embedded_redis

            embedded_redis.stop(self.redis_process)
        if not self.config.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
