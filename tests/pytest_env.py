"""Loaded with `-p tests.pytest_env` before Django is configured: each test run gets its own
var/ directory (database file, embedded Redis socket, logs, screenshots), so runs never touch
`make run` data or each other, and the directory goes away when the run ends."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Under pytest-xdist each worker is a process of its own and gets a directory of its own (its own
# database, embedded Redis and stack); the workers inherit the controller's environment, so a
# directory this module chose for the controller is replaced, one given from outside is kept.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
RUN_DIR = ROOT / "var" / "test" / (f"run-{os.getppid()}-{WORKER}" if WORKER else f"run-{os.getpid()}")
KEEP = os.environ.get("TESSERA_KEEP_TEST_VAR", "") not in ("", "0", "false")

if os.environ.get("TESSERA_TEST_VAR_DEFAULT") == "1":
    os.environ.pop("TESSERA_VAR_DIR", None)
if "TESSERA_VAR_DIR" not in os.environ:
    os.environ["TESSERA_VAR_DIR"] = str(RUN_DIR)
    os.environ["TESSERA_TEST_VAR_DEFAULT"] = "1"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Playwright's sync API and the ORM share the test thread in browser tests.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("TESSERA_PROVIDER_BACKOFF_S", "0.05")
# The demo model streams at 40 tokens/s for people watching; the stack the tests start streams
# faster (a long answer still takes ~3 s, time enough to press Stop in the middle of it).
os.environ.setdefault("TESSERA_DEMO_TOKENS_PER_SECOND", "100")
# Password hashing dominates test time; the stack subprocesses inherit this too.
os.environ.setdefault("TESSERA_FAST_PASSWORD_HASHER", "true")
# Connections made in helper threads (channels' database_sync_to_async) are closed after each
# call, so none is left open when the test database is dropped.
os.environ.setdefault("DB_CONN_MAX_AGE", "0")


SHOTS_KEPT = ROOT / "var" / "test" / "screenshots"


def pytest_configure(config: object) -> None:
    # The last run's screenshots are kept for a look after it; a new run starts afresh (its
    # xdist workers each add theirs when they end).
    if not WORKER and not KEEP:
        shutil.rmtree(SHOTS_KEPT, ignore_errors=True)


def pytest_unconfigure(config: object) -> None:
    if not KEEP and os.environ["TESSERA_VAR_DIR"] == str(RUN_DIR):
        # Screenshots are worth keeping for a look after the run.
        shots = RUN_DIR / "screenshots"
        if shots.exists():
            SHOTS_KEPT.mkdir(parents=True, exist_ok=True)
            for shot in shots.iterdir():
                shutil.move(str(shot), str(SHOTS_KEPT / shot.name))
        shutil.rmtree(RUN_DIR, ignore_errors=True)
