"""The worker writes each log record once, through the redacting handler LOGGING configures."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_worker_logs_an_error_once(stack: Any) -> None:
    from config.celery import app

    marker = f"no.such.task.{uuid.uuid4().hex}"
    app.send_task(marker)  # the worker logs an error for a task it does not know

    log = stack.logs / "worker.log"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and marker not in log.read_text(errors="replace"):
        time.sleep(0.2)
    time.sleep(0.5)  # a second copy would be written right after the first
    lines = [line for line in log.read_text(errors="replace").splitlines() if marker in line and "ERROR" in line]
    assert len(lines) == 1, lines


def test_litellm_records_are_written_once_and_redacted() -> None:
    import logging

    import agent.llm  # noqa: F401 - importing the seam imports LiteLLM

    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        # No stderr handler of LiteLLM's own: records reach only the root's redacting handler.
        assert logger.handlers == [] and logger.propagate, name
