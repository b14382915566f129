"""/healthz and /readyz against real processes: a web process, a worker and a Redis of the test's
own, which it kills and starts again."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.processes import Processes, free_port, wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def own(tmp_path: Path, django_db_setup: Any, django_db_blocker: Any) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    # A heartbeat older than 3 s is stale: a dead worker shows within seconds.
    processes.env["TESSERA_HEALTH_WORKER_FRESH_S"] = "3"
    processes.start_redis()
    yield processes
    processes.close()


def _ready(base: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{base}/readyz", timeout=10)
    return response.status_code, response.json()


def _status_becomes(base: str, code: int, timeout: float = 60) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        status, body = _ready(base)
        return body if status == code else None

    return wait_until(check, timeout, f"/readyz did not answer {code}")  # type: ignore[no-any-return]


def test_readyz_follows_worker_and_redis_while_healthz_stays_up(own: Processes) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    own.web(port)
    # No worker yet: not ready, and the body says which check failed.
    status, body = _ready(base)
    assert status == 503
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["redis"]["status"] == "ok"
    assert body["checks"]["worker"]["status"] == "fail"

    worker = own.worker()
    body = _status_becomes(base, 200)
    assert body["status"] == "ok"
    for check in ("database", "redis", "worker"):
        assert body["checks"][check]["status"] == "ok"
        assert isinstance(body["checks"][check]["latency_ms"], int | float)
    assert body["checks"]["worker"]["workers"] == 1

    # A worker killed outright sends no more heartbeats: not ready within the freshness window.
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    body = _status_becomes(base, 503, timeout=15)
    assert body["checks"]["worker"]["status"] == "fail"
    assert body["checks"]["redis"]["status"] == "ok"
    assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200

    own.worker(name="worker2")
    _status_becomes(base, 200)

    # Redis gone: not ready (and said so quickly), while liveness is untouched.
    own.stop_redis()
    status, body = _ready(base)
    assert status == 503
    assert body["checks"]["redis"]["status"] == "fail"
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["redis"]["latency_ms"] < 5000
    health = httpx.get(f"{base}/healthz", timeout=5)
    assert health.status_code == 200 and health.json() == {"status": "ok"}

    # Redis back (same socket, same data): the worker's heartbeat resumes and the host is ready.
    own.start_redis()
    _status_becomes(base, 200, timeout=90)


@pytest.mark.django_db
def test_probes_use_no_session_and_write_nothing(client: Client) -> None:
    with CaptureQueriesContext(connection) as queries:
        ready = client.get("/readyz")
        alive = client.get("/healthz")
    assert ready.status_code in (200, 503)
    assert alive.status_code == 200
    # One read, no write, and no session or CSRF cookie handed out.
    assert [q["sql"].strip().upper() for q in queries.captured_queries] == ["SELECT 1"]
    for response in (ready, alive):
        assert not response.cookies
        assert "no-cache" in response["Cache-Control"]
        assert response["X-Request-ID"]


@pytest.mark.django_db
def test_probes_answer_only_get(client: Client) -> None:
    assert client.post("/readyz").status_code == 405
    assert client.post("/healthz").status_code == 405
