"""What load balancers, orchestrators and Prometheus ask a Tessera host.

- `/healthz`: liveness. The process answers; nothing else is touched.
- `/readyz`: readiness. The database answers a `SELECT 1`, Redis a PING, and at least one worker
  sent a heartbeat within HEALTH_WORKER_FRESH_S. JSON with each check's result and latency;
  503 when one fails. No session, no CSRF, no write: cheap enough to poll every few seconds.
- `/metrics`: the host's Prometheus metrics (core.metrics), for a bearer token (METRICS_TOKEN)
  or, without one, only for a scraper on the same machine that is not a proxy forwarding
  someone else's request.

Workers announce themselves in Redis: every few seconds each worker's event loop writes its
name, pid, turns in flight and whether it is draining into a sorted set scored by time. The
beat comes from the loop that runs the turns, so a loop that is stuck stops beating too. A
worker that got SIGTERM leaves the set at once: it takes no new turns, so it does not make the
host ready.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

log = logging.getLogger(__name__)

WORKERS_KEY = "tessera:workers"
WORKER_KEY = "tessera:worker:{}"
BEAT_INTERVAL_S = 5.0
_FORWARDED = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")

_probe_client: redis.Redis | None = None


def probe_redis() -> redis.Redis:
    """A client of its own with short timeouts: a probe must answer "Redis is down" within a
    second, not wait as long as the app's own client would."""
    global _probe_client
    if _probe_client is None:
        _probe_client = redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    return _probe_client


# --- checks -------------------------------------------------------------------------------------
def _timed(check: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = {"status": "ok", **check()}
    except Exception as exc:
        # Only the error's type: the probe is public, and a driver's message can name hosts.
        result = {"status": "fail", "error": type(exc).__name__}
    result["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return result


def _database() -> dict[str, Any]:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {}


def _redis() -> dict[str, Any]:
    if not probe_redis().ping():
        raise ConnectionError("no PONG")
    return {}


def _worker() -> dict[str, Any]:
    fresh = float(settings.HEALTH_WORKER_FRESH_S)
    now = time.time()
    beats: list[tuple[bytes, float]] = probe_redis().zrangebyscore(  # type: ignore[assignment]
        WORKERS_KEY, now - fresh, "+inf", withscores=True
    )
    if not beats:
        raise LookupError(f"no worker heartbeat in the last {fresh:g} s")
    newest = max(score for _, score in beats)
    return {"workers": len(beats), "last_beat_s": round(max(0.0, now - newest), 2)}


def readiness() -> tuple[bool, dict[str, Any]]:
    checks = {"database": _timed(_database), "redis": _timed(_redis), "worker": _timed(_worker)}
    if checks["worker"]["status"] == "fail" and checks["redis"]["status"] == "ok":
        checks["worker"]["error"] = "no fresh worker heartbeat"
    ready = all(check["status"] == "ok" for check in checks.values())
    return ready, {"status": "ok" if ready else "fail", "checks": checks}


# --- views --------------------------------------------------------------------------------------
@csrf_exempt
@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@csrf_exempt
@never_cache
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    ready, body = readiness()
    return JsonResponse(body, status=200 if ready else 503)


def metrics_allowed(request: HttpRequest) -> bool:
    token = str(settings.METRICS_TOKEN)
    if token:
        given = request.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())
    # No token: a scraper on this machine only. A proxy on this machine forwarding a request
    # from elsewhere also connects from loopback, and says so in a forwarding header.
    if any(request.META.get(header) for header in _FORWARDED):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


@csrf_exempt
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        response = HttpResponse("A metrics token is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    from . import metrics as own_metrics

    # A process that died (killed, crashed) leaves its gauges behind: its turns in flight and
    # sockets are not there any more.
    own_metrics.forget_dead_processes()
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(QueueCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class QueueCollector:
    """The Celery queue's depth, read from Redis at scrape time (a gauge no process owns)."""

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        waiting = GaugeMetricFamily("tessera_celery_queue_depth", "Turn tasks waiting in the broker queue.")
        reserved = GaugeMetricFamily(
            "tessera_celery_reserved", "Turn tasks a worker has taken and not yet acknowledged."
        )
        try:
            client = probe_redis()
            queue = str(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery"))
            # Kombu keeps a queue with priorities as one list per priority step.
            names = [queue, *(f"{queue}\x06\x16{step}" for step in range(1, 10))]
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.llen(name)
            pipe.hlen("unacked")
            *lengths, unacked = pipe.execute()
        except redis.RedisError:
            return
        waiting.add_metric([], float(sum(lengths)))
        reserved.add_metric([], float(unacked))
        yield waiting
        yield reserved


# --- worker heartbeat ---------------------------------------------------------------------------
def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def beat(client: Any, *, name: str, turns: int, draining: bool, started: float) -> None:
    now = time.time()
    info = json.dumps({"name": name, "pid": os.getpid(), "started": started, "turns": turns, "draining": draining})
    async with client.pipeline(transaction=False) as pipe:
        if draining:
            pipe.zrem(WORKERS_KEY, name)
        else:
            pipe.zadd(WORKERS_KEY, {name: now})
        pipe.set(WORKER_KEY.format(name), info, ex=int(settings.HEALTH_WORKER_FRESH_S) * 2)
        # Workers gone for a day are forgotten.
        pipe.zremrangebyscore(WORKERS_KEY, "-inf", now - 86400)
        await pipe.execute()


async def run_heartbeat(
    client: Any, turns: Callable[[], int], draining: Callable[[], bool], interval_s: float = BEAT_INTERVAL_S
) -> None:
    name, started = worker_name(), time.time()
    # Several beats per freshness window, so one late beat does not make the host unready.
    interval_s = min(interval_s, float(settings.HEALTH_WORKER_FRESH_S) / 3)
    while True:
        try:
            await beat(client, name=name, turns=turns(), draining=draining(), started=started)
        except Exception:  # Redis away for a moment: the next beat tries again
            log.warning("Sending the worker heartbeat failed", exc_info=True)
        await asyncio.sleep(interval_s)


def leave(name: str | None = None) -> None:
    """Takes this worker out of the ready set at once (SIGTERM), from any thread."""
    try:
        probe_redis().zrem(WORKERS_KEY, name or worker_name())
    except redis.RedisError:
        log.warning("Leaving the set of ready workers failed", exc_info=True)


def workers() -> list[dict[str, Any]]:
    """Workers with a heartbeat in the last day, newest first, each with its last beat's age."""
    client = probe_redis()
    now = time.time()
    beats: list[tuple[bytes, float]] = client.zrevrangebyscore(  # type: ignore[assignment]
        WORKERS_KEY, "+inf", now - 86400, withscores=True
    )
    names = [name.decode() for name, _ in beats]
    raw: list[bytes | None] = client.mget([WORKER_KEY.format(name) for name in names]) if names else []  # type: ignore[assignment]
    found = []
    for name, (_, score), info in zip(names, beats, raw, strict=True):
        details = json.loads(info) if info else {}
        age = max(0.0, now - score)
        found.append(
            {
                "name": name,
                "age_s": age,
                "fresh": age <= float(settings.HEALTH_WORKER_FRESH_S),
                "turns": details.get("turns"),
                "started": details.get("started"),
            }
        )
    return found


async def watch_loop_lag(interval_s: float = 0.5) -> None:
    """How late the loop wakes up from a sleep: the delay every turn of the process shares."""
    from . import metrics

    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        await asyncio.sleep(interval_s)
        lag = max(0.0, loop.time() - started - interval_s)
        metrics.LOOP_LAG.observe(lag)
        metrics.LOOP_LAG_NOW.set(lag)
