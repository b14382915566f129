"""A document's stored bytes go with its row, however the row goes (on its own, or with its base
or its owner): a database cascade still sends post_delete per row."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from core.stored_files import delete_after_commit
from toolsets.mcp.signals import resources_changed

from .models import Document, RetrievalSettings


@receiver(post_delete, sender=Document)
def _delete_stored_file(instance: Document, **_: Any) -> None:
    delete_after_commit(instance.file)


@receiver(post_save, sender=RetrievalSettings)
def _reindex(instance: RetrievalSettings, created: bool = False, **_: Any) -> None:
    """A new embedding model (or none): the files worker re-embeds every passage with it and
    drops the old model's vectors (knowledge.embedding.fill). The row made with its defaults on
    first read has nothing to do."""
    from . import embedding

    if created and not instance.embedding_model:
        return
    embedding.queue_fill()


@receiver(resources_changed)
def _resource_changed(server_id: int, uri: str | None = None, **_: Any) -> None:
    """An MCP server announced a changed resource (or list of them) on a connection Tessera
    holds: the documents read from it are read again (knowledge.refresh)."""
    from . import refresh

    refresh.heard(server_id, uri)
