from __future__ import annotations

import time
from typing import Any

import pytest


@pytest.fixture
def make_base(db: Any) -> Any:
    from knowledge.models import KnowledgeBase

    def make(owner: Any, name: str = "Handbook", groups: list[Any] | None = None) -> KnowledgeBase:
        base = KnowledgeBase.objects.create(owner=owner, name=name)
        if groups:
            base.groups.set(groups)
        return base

    return make


@pytest.fixture
def add_document(db: Any) -> Any:
    """Adds bytes to a base and indexes them as the files worker would; returns the Document."""
    from knowledge import ingest
    from knowledge.models import Document

    def add(base: Any, name: str, data: bytes) -> Any:
        document, _ = ingest.add(base, name, data)
        ingest.index(document.pk)
        document.refresh_from_db()
        # In a transaction=True test the queued task reaches a stack's files worker when one is
        # running (an earlier module started it): that worker may have claimed the document
        # first, and `index` above then leaves it to it. Wait for whichever reader won.
        deadline = time.monotonic() + 60
        while document.status not in (Document.Status.READY, Document.Status.FAILED):
            assert time.monotonic() < deadline, f"document {document.pk} still {document.status}"
            time.sleep(0.1)
            document.refresh_from_db()
        return document

    return add
