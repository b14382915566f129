from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from agent.exceptions import ProviderError

from . import embedding, ingest, refresh

log = logging.getLogger(__name__)
RETRY_S = 300


# Celery ships no type information: its decorator would leave the task untyped.
@shared_task(  # type: ignore[untyped-decorator]
    name=ingest.INDEX_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True, max_retries=None
)
def index_document(self: Any, document_id: int) -> None:
    """Reads one knowledge document into chunks (in the files worker's queue). Redelivered when
    its worker dies; the claim in the document's row makes a second delivery harmless, and one
    arriving while another worker holds the claim waits until that claim is either finished
    or stale (its worker died) rather than being dropped."""
    ingest.index(document_id)
    wait = ingest.held_for(document_id)
    if wait is not None:  # another worker holds it (what this one took, it finished)
        raise self.retry(countdown=wait)


@shared_task(  # type: ignore[untyped-decorator]
    name=embedding.EMBED_TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def embed_missing(self: Any) -> int:
    """Embeds the passages that have no vector of the configured model, and deletes vectors of
    any other model (knowledge.embedding.fill): a re-index after the model changed. A provider
    that fails is asked again later; meanwhile those passages are found by keyword."""
    try:
        return embedding.fill()
    except ProviderError as exc:
        log.warning("Embedding passages failed (%s); trying again in %s s", exc.message, RETRY_S)
        raise self.retry(countdown=RETRY_S, max_retries=20) from None


@shared_task(name=refresh.REFRESH_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
def refresh_resources() -> int:
    """Celery beat's periodic check of MCP-resource documents (knowledge.refresh): queues the
    ones due, a bounded slice per tick. A lost tick is harmless; the next one takes them."""
    return refresh.tick()
