"""Loaded with `-p tests.pytest_env` before Django is configured: each test run gets its own
var/ directory (database file, embedded Redis socket, logs, screenshots), so runs never touch
`make run` data or each other, and the directory goes away when the run ends."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = ROOT / "var" / "test" / f"run-{os.getpid()}"
KEEP = os.environ.get("TESSERA_KEEP_TEST_VAR", "") not in ("", "0", "false")

os.environ.setdefault("TESSERA_VAR_DIR", str(RUN_DIR))
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


def pytest_unconfigure(config: object) -> None:
    if not KEEP and os.environ["TESSERA_VAR_DIR"] == str(RUN_DIR):
        # Screenshots are worth keeping for a look after the run.
        shots = RUN_DIR / "screenshots"
        if shots.exists():
            target = ROOT / "var" / "test" / "screenshots"
            shutil.rmtree(target, ignore_errors=True)
            shutil.move(str(shots), str(target))
        shutil.rmtree(RUN_DIR, ignore_errors=True)
