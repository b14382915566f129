"""/metrics: what the real worker counts shows up in the web process's scrape, the histograms
have their buckets, and only an authorised scraper is answered."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from chat.models import Chat, Message, Turn
from chat.selection import default_selection
from core import metrics
from toolsets.models import ToolExecution

pytestmark = [pytest.mark.integration]


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _scrape(base: str) -> dict[Any, float]:
    response = httpx.get(f"{base}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


@pytest.mark.django_db(transaction=True)
def test_a_real_turn_moves_the_counters(stack: Any, user: Any, demo_model: Any) -> None:
    from chat.tasks import run_turn

    before = _scrape(stack.url)
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools=default_selection())
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content="What is 12*7?")
    run_turn.delay(turn.pk)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        turn.refresh_from_db()
        if not turn.is_active:
            break
        time.sleep(0.2)
    assert turn.status == Turn.Status.COMPLETED, (turn.status, turn.error)
    execution = ToolExecution.objects.get(turn=turn)

    after = _scrape(stack.url)

    def moved(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert moved("tessera_turns_started_total") >= 1
    assert moved("tessera_turns_finished_total", outcome="completed") >= 1
    assert moved("tessera_tool_executions_total", toolset=execution.toolset, tool=execution.tool, status="success") >= 1
    assert moved("tessera_tool_duration_seconds_count", toolset=execution.toolset, tool=execution.tool) >= 1
    assert moved("tessera_time_to_first_token_seconds_count") >= 1
    assert moved("tessera_fragment_latency_seconds_count") >= 2
    assert moved("tessera_tokens_total", kind="completion") > 0
    assert moved("tessera_tokens_total", kind="prompt") > 0
    # Written by the worker's loop twice a second since it started.
    assert _value(after, "tessera_worker_loop_lag_seconds_count") > 0
    # Read from Redis at scrape time.
    assert ("tessera_celery_queue_depth", frozenset()) in after
    # Nothing left counted as running once the turn is over. The stack is shared by the worker's
    # earlier test modules, one of which may have left a slow turn of its own running: compare
    # with the count before this turn started rather than with zero.
    deadline = time.monotonic() + 10
    while moved("tessera_turns_in_flight") > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        after = _scrape(stack.url)
    assert moved("tessera_turns_in_flight") <= 0


@pytest.mark.django_db(transaction=True)
def test_histograms_have_their_buckets(stack: Any) -> None:
    text = httpx.get(f"{stack.url}/metrics", timeout=10).text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    expected = {
        "tessera_time_to_first_token_seconds": metrics.FIRST_TOKEN_BUCKETS,
        "tessera_fragment_latency_seconds": metrics.FAST_BUCKETS,
        "tessera_worker_loop_lag_seconds": metrics.FAST_BUCKETS,
        "tessera_tool_duration_seconds": metrics.TOOL_BUCKETS,
    }
    for name, buckets in expected.items():
        assert families[name].type == "histogram", name
        bounds = {float(sample.labels["le"]) for sample in families[name].samples if sample.name == f"{name}_bucket"}
        assert bounds == {*buckets, float("inf")}, name


@pytest.mark.django_db
def test_metrics_need_the_token_when_one_is_set(client: Client) -> None:
    with override_settings(METRICS_TOKEN="a-long-metrics-token"):
        anonymous = client.get("/metrics")
        assert anonymous.status_code == 401
        assert anonymous["WWW-Authenticate"].startswith("Bearer")
        assert b"tessera_" not in anonymous.content
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong-token").status_code == 401
        assert client.get("/metrics", HTTP_AUTHORIZATION="Basic a-long-metrics-token").status_code == 401
        allowed = client.get("/metrics", HTTP_AUTHORIZATION="Bearer a-long-metrics-token")
        assert allowed.status_code == 200
        assert b"tessera_turns_started_total" in allowed.content


@pytest.mark.django_db
def test_without_a_token_only_a_local_scraper_is_answered(client: Client) -> None:
    with override_settings(METRICS_TOKEN=""):
        assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1
        assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 401
        # A proxy on this machine forwarding someone's request connects from loopback too.
        assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 401
        assert client.get("/metrics", HTTP_FORWARDED="for=203.0.113.9").status_code == 401
        assert client.post("/metrics").status_code == 405


@pytest.mark.django_db
def test_a_dead_process_gauges_are_dropped_and_its_counters_kept(client: Client) -> None:
    import subprocess
    import sys

    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    def current() -> dict[Any, float]:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return {(s.name, frozenset(s.labels.items())): s.value for m in registry.collect() for s in m.samples}

    before = current()
    # Another process of the host counts a socket and a turn, then is killed outright.
    script = (
        "import os, signal\n"
        "from core import metrics\n"
        "metrics.OPEN_WEBSOCKETS.inc(5)\n"
        "metrics.TURNS_STARTED.inc()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == -9
    assert _value(current(), "tessera_open_websockets") == _value(before, "tessera_open_websockets") + 5

    scraped = _samples(client.get("/metrics").content.decode())
    assert _value(scraped, "tessera_open_websockets") == _value(before, "tessera_open_websockets")
    assert _value(scraped, "tessera_turns_started_total") >= _value(before, "tessera_turns_started_total") + 1


@pytest.mark.django_db(transaction=True)
def test_provider_errors_and_retries_are_counted(stack: Any, user: Any, demo_model: Any) -> None:
    from chat.tasks import run_turn

    before = _scrape(stack.url)
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={})
    turn = Turn.objects.create(chat=chat, model=demo_model)
    # The demo model answers 503 before its first token, every time: retried, then failed.
    Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content="[demo:fail-before]")
    run_turn.delay(turn.pk)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Turn.objects.get(pk=turn.pk).is_active:
        time.sleep(0.2)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    after = _scrape(stack.url)
    assert _value(after, "tessera_provider_errors_total", kind=turn.error_kind) > _value(
        before, "tessera_provider_errors_total", kind=turn.error_kind
    )
    assert _value(after, "tessera_provider_retries_total") >= _value(before, "tessera_provider_retries_total") + 1
    assert _value(after, "tessera_turns_finished_total", outcome="failed") > _value(
        before, "tessera_turns_finished_total", outcome="failed"
    )
