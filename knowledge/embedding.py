"""Embedding passages with the admin's model (RetrievalSettings), through the LiteLLM seam.

Ingestion embeds a document's passages in the files worker before writing them (`for_passages`).
Whatever is left without a vector of the current model — the model changed (a re-index), the
provider was down during ingestion, a worker died — is filled by `fill`, the
`knowledge.embed_missing` task, which also deletes the vectors of any other model. It is queued
when the settings change and when a files worker starts; running it twice at once is harmless
(a passage's vector is written once).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from celery import current_app
from django.db import transaction

from agent import embeddings
from agent.exceptions import ProviderError
from agent.model_config import ModelConfig

from . import vectors
from .models import Chunk, ChunkVector, RetrievalSettings

log = logging.getLogger(__name__)

EMBED_TASK = "knowledge.embed_missing"
FILL_BATCH = 256
DELETE_BATCH = 2000
# Embedding calls run inside a search the model waits on: a short timeout and one retry.
QUERY_TIMEOUT_S = 10.0


def embedding_config(row: RetrievalSettings | None = None, *, for_query: bool = False) -> ModelConfig | None:
    row = row or RetrievalSettings.load()
    if not row.embedding_model:
        return None
    return ModelConfig(
        model=row.embedding_model,
        api_base=row.embedding_api_base or None,
        api_key=row.embedding_api_key or None,
        extra=dict(row.embedding_params or {}),
        retries=1 if for_query else 3,
        timeout_s=QUERY_TIMEOUT_S if for_query else 60.0,
    )


def rerank_config(row: RetrievalSettings | None = None) -> ModelConfig | None:
    row = row or RetrievalSettings.load()
    if not (row.embedding_model and row.rerank_model):
        return None
    return ModelConfig(
        model=row.rerank_model,
        api_base=row.rerank_api_base or None,
        api_key=row.rerank_api_key or None,
        retries=1,
        timeout_s=QUERY_TIMEOUT_S,
    )


def embed_texts(config: ModelConfig, texts: Sequence[str]) -> list[list[float]]:
    return embeddings.embed(config, texts)


def passage_text(heading: str, text: str) -> str:
    """What is embedded for a passage: its headings give it context ("Install › Proxy")."""
    return f"{heading}\n\n{text}" if heading else text


def for_passages(texts: Sequence[str]) -> tuple[str, list[list[float]]] | None:
    """(space, one vector per text) with the configured model, or None: no model, or the
    provider failed (logged; `fill` catches the passages up later)."""
    row = RetrievalSettings.load()
    config = embedding_config(row)
    if config is None:
        return None
    try:
        return row.space, embed_texts(config, texts)
    except ProviderError as exc:
        log.warning("Embedding passages failed (%s): they are searched by keyword until filled", exc.message)
        queue_fill(countdown=60)
        return None


def queue_fill(countdown: float = 0) -> None:
    """Queues `fill` (on commit): the files worker embeds what lacks a vector of the model."""
    transaction.on_commit(lambda: current_app.send_task(EMBED_TASK, countdown=countdown or None))


def fill(limit: int | None = None) -> int:
    """Deletes vectors of other models, then embeds passages that have none of the current
    model, a batch at a time, until none is left (or `limit` passages were embedded). Returns
    how many it embedded."""
    row = RetrievalSettings.load()
    space = row.space
    while True:
        stale = list(ChunkVector.objects.exclude(space=space).values_list("pk", flat=True)[:DELETE_BATCH])
        if not stale:
            break
        ChunkVector.objects.filter(pk__in=stale).delete()
    config = embedding_config(row)
    if config is None:
        return 0
    done = 0
    while limit is None or done < limit:
        batch = list(
            Chunk.objects.filter(vector__isnull=True)
            .only("id", "base_id", "document_id", "heading", "text")
            .order_by("id")[:FILL_BATCH]
        )
        if not batch:
            break
        found = embed_texts(config, [passage_text(c.heading, c.text) for c in batch])
        if RetrievalSettings.load().space != space:
            break  # the admin changed the model meanwhile: the task queued by that change goes on
        vectors.write(batch, found, space)
        done += len(batch)
    return done


def missing(base_ids: Sequence[int], space: str | None = None) -> int:
    """How many passages of these bases have no vector (yet) of the current model."""
    space = RetrievalSettings.load().space if space is None else space
    return Chunk.objects.filter(base_id__in=base_ids).exclude(vector__space=space).count()
