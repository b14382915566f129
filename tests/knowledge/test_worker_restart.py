"""Through real files workers: one killed while it reads a document, and the next one started
finishing it (its start takes up what the dead one left half-read)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from knowledge import ingest
from knowledge.models import Document
from tests.processes import Processes, wait_until
from tests.toolsets.files import samples
from toolsets.files.models import FileLimits

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]


def test_a_document_half_read_by_a_killed_worker_is_finished_by_the_next(
    tmp_path: Path, user: Any, make_base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = FileLimits.load()
    limits.extract_seconds = 60
    limits.save()
    base = make_base(user)
    # Long enough to read that the worker can be killed in the middle of it.
    book = samples.pdf([f"Chapter {n}. " + "The proxy setting is under Network. " * 40 for n in range(400)])
    monkeypatch.setattr(ingest, "queue", lambda document_id: None)  # sent to the test's own broker below
    document, _ = ingest.add(base, "book.pdf", book)
    own = Processes(tmp_path)
    own.start_redis()
    env = {"TESSERA_KNOWLEDGE_CLAIM_MARGIN_S": "1"}
    try:
        first = own.worker("files-1", concurrency=1, options=["--queues", "files"], **env)
        broker = own.broker()
        broker.send_task(ingest.INDEX_TASK, args=[document.pk], queue="files")
        wait_until(
            lambda: Document.objects.get(pk=document.pk).status == "indexing", 120, "the first worker never took it"
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        assert Document.objects.get(pk=document.pk).status == "indexing"  # left half-read

        # Well before its claim would go stale on its own (60 s + 1 s): the next worker's start
        # queues it again, and its message waits for the claim to go stale, then reads it.
        started = time.monotonic()
        own.worker("files-2", concurrency=1, options=["--queues", "files"], **env)
        wait_until(lambda: Document.objects.get(pk=document.pk).status == "ready", 240, "it was never finished")
        document.refresh_from_db()
        assert document.attempts == 2 and document.chunk_count > 100
        assert time.monotonic() - started < 240
    finally:
        own.close()
