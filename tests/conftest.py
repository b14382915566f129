from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from core import embedded_redis
from core.processes import web_command, worker_command
from tests.processes import BOOT_S, PROCESS_TEST_TIMEOUT_S

ROOT = Path(__file__).resolve().parent.parent
# The scripted provider as a fixture (`provider`), for the tests that run turns on the real worker.
pytest_plugins = ["tests.providers.worker_turns"]


@pytest.fixture(scope="session", autouse=True)
def redis_server() -> Iterator[str]:
    """A real Redis for the whole run: REDIS_URL if given, else the embedded server."""
    process = None
    if not os.environ.get("REDIS_URL"):
        process = embedded_redis.start(settings.EMBEDDED_REDIS_SOCKET)
    yield settings.REDIS_URL
    embedded_redis.stop(process)


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_use_migrations: bool,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's, except that a SQLite test database is a copy of one migrated once
    (tests/database.py) instead of each worker migrating its own."""
    from django.db import connections
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _disable_migrations

    from tests import database

    verbosity = request.config.option.verbose
    database.keep_model_rows_through_flush()
    if django_db_use_migrations and not django_db_keepdb:
        with django_db_blocker.unblock():
            copied = database.setup_sqlite(verbosity)
        if copied:
            yield
            with django_db_blocker.unblock():
                connections.close_all()
                name = Path(settings.DATABASES["default"]["NAME"])
                for path in (name, Path(f"{name}-wal"), Path(f"{name}-shm")):
                    path.unlink(missing_ok=True)
            return
    if not django_db_use_migrations:
        _disable_migrations()
    keepdb = django_db_keepdb and not django_db_createdb
    with django_db_blocker.unblock():
        config = setup_databases(verbosity=verbosity, interactive=False, keepdb=keepdb)
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            teardown_databases(config, verbosity=verbosity)


@pytest.fixture(scope="session", autouse=True)
def static_files() -> None:
    """Pages name their stylesheet and scripts through the manifest of the built static files,
    as in production: built once, and again only when their sources change (`make test` has
    done it already)."""
    import fcntl

    from django.core.management import call_command

    # Parallel workers share the checkout's built files: one builds, the others wait and find
    # them up to date.
    lock = ROOT / "var" / "test" / ".buildstatic.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        call_command("buildstatic")


@pytest.fixture(scope="session", autouse=True)
def demo_provider() -> None:
    """The offline demo model, registered as a worker process registers it at start-up."""
    import demo

    demo.register()


# Tessera's keys a test may leave behind (Celery's queue bindings live in the same database and
# stay): live turn state, rate limits, the cache (it may hold rows of a database rolled back
# since), tool policy (breakers, cached results), questions to the person (approvals, MCP
# elicitations), files being read, budget counters and the workers' fair share.
_TEST_KEY_PATTERNS = ("turn", "rl", "cache", "policy", "ask", "files", "budget", "fair")
# One round trip for every pattern: SCAN and DEL inside Redis instead of a SCAN per pattern from
# here before each of the suite's thousands of tests.
_CLEAN_SCRIPT = """
local removed = 0
for _, pattern in ipairs(ARGV) do
  local cursor = "0"
  repeat
    local found = redis.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
    cursor = found[1]
    for _, key in ipairs(found[2]) do
      redis.call("DEL", key)
      removed = removed + 1
    end
  until cursor == "0"
end
return removed
"""


@pytest.fixture(scope="session")
def _redis_cleaner(redis_server: str) -> Any:
    client = redis.from_url(redis_server)
    script = client.register_script(_CLEAN_SCRIPT)
    return lambda: script(args=[f"tessera:{name}:*" for name in _TEST_KEY_PATTERNS])


@pytest.fixture(autouse=True)
def _clean_redis(_redis_cleaner: Any) -> None:
    # Database ids restart between tests, so a turn's live state from an earlier test could be
    # mistaken for a new turn's.
    _redis_cleaner()


@pytest.fixture(autouse=True)
def _close_pooled_mcp_connections() -> Iterator[None]:
    """The MCP connections a test's web requests pooled on this process's lasting loop
    (toolsets.mcp.client.on_lasting_loop) end with it, stdio servers stopped, as its servers do."""
    yield
    client = sys.modules.get("toolsets.mcp.client")
    if client is not None:
        client.close_lasting()


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


def _wait_for_http(url: str, process: subprocess.Popen[bytes], timeout: float = BOOT_S) -> None:
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


def _wait_for_worker(redis_url: str, worker: subprocess.Popen[bytes], timeout: float = BOOT_S) -> None:
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"worker exited with {worker.returncode}")
        replies = app.control.ping(timeout=0.5)
        if replies:
            return
    raise RuntimeError(f"the Celery worker did not answer within {timeout} s")


@pytest.hookimpl(trylast=True)  # after pytest-django's own reordering
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Browser tests last: Playwright's sync API keeps an event loop running in the main thread
    for the rest of the session, which async tests cannot share.

    A browser test, or one that starts processes or uses the stack, that fails runs once more:
    on a loaded two-core machine a browser, web processes and workers share the cores with three
    other test workers, and a wait can outlast its allowance. A test that fails twice fails;
    every rerun is listed in the summary ("rerun test summary info") and is a bug to look at, as
    the steer test's was (the waiting messages pushed by two processes could arrive out of
    order). Tests of one process alone get no second try."""
    for item in items:
        browser = "/e2e/" in str(item.path)
        if browser:
            item.add_marker(pytest.mark.e2e)
        starts_processes = item.get_closest_marker("integration") or "stack" in getattr(item, "fixturenames", ())
        if starts_processes and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S))
        if (browser or starts_processes) and not item.get_closest_marker("flaky"):
            item.add_marker(pytest.mark.flaky(reruns=1))
    items.sort(key=lambda item: "/e2e/" in str(item.path))


# Why each rerun test failed its first try: pytest-rerunfailures lists only their names, and a
# rerun in CI is a bug to look at (see above) that the log must explain.
_rerun_reasons: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun":  # type: ignore[comparison-overlap]  # the plugin's own outcome
        lines = (report.longreprtext or "").splitlines()
        _rerun_reasons.append((f"{report.nodeid} ({report.when})", "\n".join(lines[-40:])))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _rerun_reasons:
        terminalreporter.section("why tests were rerun (the end of each first try's failure)")
        for name, reason in _rerun_reasons:
            terminalreporter.write_line(f"--- {name}")
            terminalreporter.write_line(reason)
