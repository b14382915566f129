from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from config import embedded_redis
from config.processes import web_command, worker_command

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def redis_server() -> Iterator[str]:
    """A real Redis for the whole run: REDIS_URL if given, else the embedded server."""
    process = None
    if not os.environ.get("REDIS_URL"):
        process = embedded_redis.start(settings.EMBEDDED_REDIS_SOCKET)
    yield settings.REDIS_URL
    embedded_redis.stop(process)


@pytest.fixture(scope="session", autouse=True)
def static_files() -> None:
    """Pages name their stylesheet and scripts through the manifest of the built static files,
    as in production: built once, and again only when their sources change (`make test` has
    done it already)."""
    from django.core.management import call_command

    call_command("buildstatic")


@pytest.fixture(scope="session", autouse=True)
def demo_provider() -> None:
    """The offline demo model, registered as a worker process registers it at start-up."""
    from chat import demo

    demo.register()


@pytest.fixture(autouse=True)
def _clean_redis(redis_server: str) -> None:
    # Database ids restart between tests, so a turn's live state from an earlier test could be
    # mistaken for a new turn's.
    # Only Tessera's keys: Celery's queue bindings live in the same database.
    client = redis.from_url(redis_server)
    # The cache too: it may hold rows of a database that was rolled back since.
    keys = [
        *client.scan_iter("tessera:turn:*"),
        *client.scan_iter("tessera:rl:*"),
        *client.scan_iter("tessera:cache:*"),
        # Tool policy: circuit breakers, cached results, approvals.
        *client.scan_iter("tessera:policy:*"),
        # Files being read, per user.
        *client.scan_iter("tessera:files:*"),
        # Budgets: spend counters per period.
        *client.scan_iter("tessera:budget:*"),
    ]
    if keys:
        client.delete(*keys)


@pytest.fixture
def steady_mcp_snapshot(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The MCP servers are read again from the database every few seconds: a test that compares
    the queries of two requests must not have that re-read fall between them (on a slow machine
    it did). Saved changes still rebuild the snapshot at once."""
    from toolsets.mcp import catalog

    monkeypatch.setattr(catalog, "SNAPSHOT_TTL_S", 3600.0)
    catalog.invalidate()
    yield
    catalog.invalidate()


@pytest.fixture
def demo_model(db: Any) -> Any:
    from chat.models import LLMModel

    model, _ = LLMModel.objects.get_or_create(
        model="demo/tessera", defaults={"name": "Demo (offline)", "enabled": True}
    )
    return model


@pytest.fixture
def user(db: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("alice", password="correct horse battery")


@pytest.fixture
def other_user(db: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("mallory", password="another long passphrase")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_http(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


class Stack:
    def __init__(
        self, url: str, worker: subprocess.Popen[bytes], web: subprocess.Popen[bytes], env: dict[str, str], logs: Path
    ) -> None:
        self.url = url
        self.worker = worker
        self.web = web
        self.env = env  # what the stack's processes run with, for tests that start more of them
        self.logs = logs

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://")


@pytest.fixture(scope="session")
def stack(django_db_setup: Any, django_db_blocker: Any, redis_server: str) -> Iterator[Stack]:
    """The real thing: Daphne and a Celery worker process on the test database and Redis."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        database_url = f"sqlite:///{db['NAME']}"
    else:
        database_url = (
            f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}"
            f"/{db['NAME']}"
        )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_server,
        # As deployed: the built static files (minified, hashed), no debug pages.
        "DEBUG": "false",
        # Content types change ids whenever a transactional test flushes (tests/stack_middleware.py).
        "TESSERA_EXTRA_MIDDLEWARE": "tests.stack_middleware.FreshContentTypes",
        "PYTHONUNBUFFERED": "1",
    }
    logs = Path(settings.VAR_DIR) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    worker = subprocess.Popen(
        worker_command(concurrency=16, hostname=f"test-{port}@%h"),
        cwd=ROOT,
        env=env,
        stdout=open(logs / "worker.log", "wb"),  # noqa: SIM115 - the child process owns it
        stderr=subprocess.STDOUT,
    )
    web = subprocess.Popen(
        web_command(host="127.0.0.1", port=port),
        cwd=ROOT,
        env=env,
        stdout=open(logs / "web.log", "wb"),  # noqa: SIM115 - the child process owns it
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_http(f"http://127.0.0.1:{port}/login/", web)
        _wait_for_worker(redis_server, worker)
        yield Stack(f"http://127.0.0.1:{port}", worker, web, env, logs)
    finally:
        for process in (web, worker):
            process.terminate()
        for process in (web, worker):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def _wait_for_worker(redis_url: str, worker: subprocess.Popen[bytes], timeout: float = 60) -> None:
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"worker exited with {worker.returncode}")
        replies = app.control.ping(timeout=0.5)
        if replies:
            return
    raise RuntimeError("the Celery worker did not answer within 60 s")


@pytest.hookimpl(trylast=True)  # after pytest-django's own reordering
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Browser tests last: Playwright's sync API keeps an event loop running in the main thread
    for the rest of the session, which async tests cannot share."""
    for item in items:
        if "/e2e/" in str(item.path):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: "/e2e/" in str(item.path))
