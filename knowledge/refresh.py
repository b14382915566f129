"""Keeping documents read from MCP resources current: each is read again once it was last
checked longer ago than the admin's interval (RetrievalSettings.mcp_refresh_minutes; 0 turns it
off), and whenever its base's owner asks ("Refresh now"). Reading again is cheap for an
unchanged resource: the files worker compares its hash and leaves its passages and vectors as
they are (knowledge.ingest); a changed one is indexed again; one the server no longer has fails
with that reason and stays listed, for its owner to see and delete.

Celery beat sends `knowledge.refresh_resources` every KNOWLEDGE_REFRESH_TICK_S. Each tick
queues at most KNOWLEDGE_REFRESH_PER_TICK documents, fewer while MCP documents queued earlier
still wait, so a base of thousands of resources is checked a slice at a time and never floods
the files queue ahead of people's uploads. Documents already queued or being read are left to
the reading under way.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from . import ingest, mcp_sources
from .models import Document, KnowledgeBase, RetrievalSettings

REFRESH_TASK = "knowledge.refresh_resources"
# "Refresh now" on one base queues at most this many (the least recently checked first); the
# rest follow on the next press or the periodic refresh.
MAX_NOW = 1000
SETTLED = (Document.Status.READY, Document.Status.FAILED)
PENDING = (Document.Status.QUEUED, Document.Status.INDEXING)


def interval() -> timedelta | None:
    minutes = RetrievalSettings.load().mcp_refresh_minutes
    return timedelta(minutes=minutes) if minutes else None


def _oldest_first(documents: QuerySet[Document], limit: int) -> list[int]:
    ordered = documents.order_by(F("checked_at").asc(nulls_first=True), "pk")
    return list(ordered.values_list("pk", flat=True)[:limit])


def _requeue(document_ids: list[int]) -> int:
    """Queues each document again that is still settled (a worker or an owner's upload may have
    taken it since it was picked); returns how many were queued."""
    queued = 0
    with transaction.atomic():
        for document_id in document_ids:
            if Document.objects.filter(pk=document_id, status__in=SETTLED).update(
                status=Document.Status.QUEUED, progress=0.0, error="", attempts=0, claimed_at=None
            ):
                ingest.queue(document_id)
                queued += 1
    return queued


def tick(now: datetime | None = None) -> int:
    """Queues the MCP documents due for a check, within this tick's share; returns how many."""
    every = interval()
    if every is None:
        return 0
    now = now or timezone.now()
    mcp = Document.objects.filter(source=Document.Source.MCP)
    room = settings.KNOWLEDGE_REFRESH_PER_TICK - mcp.filter(status__in=PENDING).count()
    if room <= 0:
        return 0
    due = mcp.filter(Q(checked_at__isnull=True) | Q(checked_at__lt=now - every), status__in=SETTLED)
    return _requeue(_oldest_first(due, room))


def refresh_base(base: KnowledgeBase) -> int:
    """The owner's "Refresh now": every MCP document of the base not already queued is read
    again (at most MAX_NOW of them). Returns how many were queued."""
    settled = base.documents.filter(source=Document.Source.MCP, status__in=SETTLED)
    return _requeue(_oldest_first(settled, MAX_NOW))


def heard(server_id: int, uri: str | None) -> int:
    """A server said a resource changed (`uri`) or its list of resources did (None): the
    documents made from it are read again now, within one tick's share (the least recently
    checked first; the periodic check takes any others). Returns how many were queued."""
    from toolsets.mcp.models import MCPServer

    slug = MCPServer.objects.filter(pk=server_id).values_list("slug", flat=True).first()
    if slug is None:
        return 0
    settled = Document.objects.filter(source=Document.Source.MCP, status__in=SETTLED)
    if uri is None:
        documents = settled.filter(reference__startswith=mcp_sources.reference(slug, ""))
    else:
        documents = settled.filter(reference=mcp_sources.reference(slug, uri))
    return _requeue(_oldest_first(documents, settings.KNOWLEDGE_REFRESH_PER_TICK))
