"""Prometheus metrics of every Tessera process on a host, exposed together at `/metrics`.

Multiprocess mode (prometheus-client): each process writes its values to small memory-mapped
files in one directory per host (`PROMETHEUS_MULTIPROC_DIR`, set by config.settings before this
module is imported), and whichever web process is scraped adds them all up. One scrape target
per host then covers its web processes and workers, however many there are, and a restarted
process neither loses its counters nor needs a port of its own.

Plain Python (no Django): the agent loop's LiteLLM seam counts provider errors here too.
Labels are bounded sets (outcomes, error kinds, registered tools), never free text.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client import multiprocess as _multiprocess

_FILE = re.compile(r"^[a-z_]+_(\d+)\.db$")


def directory() -> Path | None:
    raw = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(raw) if raw else None


def _drop_own_live_files() -> None:
    # A process that got the pid of a dead one would otherwise open that one's live gauge files
    # and carry on from its values (its turns in flight, its sockets). Before any metric exists.
    folder = directory()
    if folder is not None and folder.is_dir():
        for path in folder.glob(f"gauge_live*_{os.getpid()}.db"):
            path.unlink(missing_ok=True)


_drop_own_live_files()

# Fragment and loop timings are milliseconds; a model's first token takes seconds.
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
FIRST_TOKEN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0)
TOOL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
OUTCOMES = ("completed", "failed", "stopped", "interrupted")

TURNS_STARTED = Counter("tessera_turns_started", "Turns a worker claimed and started running.")
TURNS_FINISHED = Counter("tessera_turns_finished", "Turns that ended, by outcome.", ["outcome"])
TURNS_IN_FLIGHT = Gauge("tessera_turns_in_flight", "Turns running now.", multiprocess_mode="livesum")
FIRST_TOKEN = Histogram(
    "tessera_time_to_first_token_seconds",
    "From a turn's start to the first text the model streamed.",
    buckets=FIRST_TOKEN_BUCKETS,
)
TOKENS = Counter("tessera_tokens", "Tokens of model calls as the provider reported them.", ["kind"])
FRAGMENT_LATENCY = Histogram(
    "tessera_fragment_latency_seconds",
    "From the first event a fragment carries to the fragment published to the chat's group.",
    buckets=FAST_BUCKETS,
)
PROVIDER_ERRORS = Counter("tessera_provider_errors", "Model calls that ended in a provider error, by kind.", ["kind"])
PROVIDER_RETRIES = Counter("tessera_provider_retries", "Requests to a provider sent again after a retryable error.")
TOOL_EXECUTIONS = Counter(
    "tessera_tool_executions", "Tool calls executed, by toolset, tool and status.", ["toolset", "tool", "status"]
)
TOOL_DURATION = Histogram(
    "tessera_tool_duration_seconds", "How long a tool call took.", ["toolset", "tool"], buckets=TOOL_BUCKETS
)
OPEN_WEBSOCKETS = Gauge("tessera_open_websockets", "Chat sockets open now.", multiprocess_mode="livesum")
LOOP_LAG = Histogram(
    "tessera_worker_loop_lag_seconds",
    "How late the worker's event loop ran a timer: time every turn of the process waited.",
    buckets=FAST_BUCKETS,
)
LOOP_LAG_NOW = Gauge(
    "tessera_worker_loop_lag_last_seconds",
    "The worker loop's latest lag (the worst worker).",
    multiprocess_mode="livemax",
)
WORKERS_DRAINING = Gauge(
    "tessera_workers_draining", "Workers that got SIGTERM and are finishing their turns.", multiprocess_mode="livesum"
)


def forget_dead_processes() -> None:
    """Drops the live gauges of processes that are gone (a crashed worker's turns in flight must
    not be counted for ever); their counters stay, so totals never go backwards. Called when a
    process starts."""
    folder = directory()
    if folder is None or not folder.is_dir():
        return
    pids = {int(m.group(1)) for path in folder.iterdir() if (m := _FILE.match(path.name)) and "live" in path.name}
    for pid in pids:
        if pid != os.getpid() and not _alive(pid):
            _multiprocess.mark_process_dead(pid, str(folder))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def tool_executed(toolset: str, tool: str, status: str, duration_s: float) -> None:
    TOOL_EXECUTIONS.labels(toolset, tool, status).inc()
    TOOL_DURATION.labels(toolset, tool).observe(duration_s)
