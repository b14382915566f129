"""What a process imports before it does anything: LiteLLM (seconds of CPU to import) only in
the processes that call models. The web process, management commands, beat and the files and
sandbox workers start without it and import it at their first model call, if any."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
import config.asgi, config.urls  # the web process: every view
from config.celery import app
app.loader.import_default_modules()  # a worker or beat: every task
print("litellm" in sys.modules)
"""


def test_the_web_process_and_the_task_modules_start_without_litellm() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "False", "LiteLLM is imported at start-up again"
