"""Filling a base: adding a document (skipped when unchanged, indexed again when changed),
reading it into chunks in the files worker, and unpacking zips into documents.

Every step's state is in the document's row. A worker takes a document by a conditional update
(`claim`); one that dies mid-way leaves the row "indexing" with an old claim, which the next
delivery of the task (or `requeue_unfinished` when a files worker starts) takes over. Chunks are
replaced in one transaction, and only by the claim that is still current: a document uploaded
again while it was being read is never overwritten by the older reading.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.documents.extract import ExtractError, Limits
from core.redact import redact
from toolsets.base import ToolFailure
from toolsets.files.detect import HEAD_BYTES, Refused, detect
from toolsets.files.models import FileLimits
from toolsets.files.sandbox import run
from toolsets.mcp.models import MCPServer

from . import archives, chunking, embedding, vectors
from .models import Chunk, Document, KnowledgeBase

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
BATCH = 200
MAX_TITLE = 300
# Resources picked from a server's list in one go (the list shows at most 200).
MAX_RESOURCES_AT_ONCE = 200


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def add(
    base: KnowledgeBase, reference: str, data: bytes, *, source: str = Document.Source.UPLOAD
) -> tuple[Document, bool]:
    """Stores a document under `reference` and queues its indexing: (document, queued). An
    upload identical to the one indexed under that name is not read again (queued False)."""
    reference = reference.strip()[:1000] or "document"
    content_hash = digest(data)
    document = Document.objects.filter(base=base, reference=reference).first()
    if document is not None and document.content_hash == content_hash and document.status != Document.Status.FAILED:
        return document, False
    if document is None:
        document = Document(base=base, reference=reference, source=source)
    elif document.file:
        document.file.delete(save=False)
    document.title = reference.rsplit("/", 1)[-1][:MAX_TITLE]
    document.size = len(data)
    document.content_hash = content_hash
    document.status = Document.Status.QUEUED
    document.progress = 0.0
    document.error = ""
    document.attempts = 0
    document.claimed_at = None
    document.file.save("upload", ContentFile(data), save=False)
    document.save()
    queue(document.pk)
    return document, True


def add_page(base: KnowledgeBase, url: str) -> Document:
    """Queues a web page for reading; its text is fetched by the worker through the Web tool's
    address checks (public addresses only, every redirect checked again). Added again, it is
    fetched again, and indexed again only if its text changed."""
    url = url.strip()[:1000]
    document, _ = Document.objects.get_or_create(
        base=base, reference=url, defaults={"source": Document.Source.WEB, "title": url[:MAX_TITLE]}
    )
    if document.source != Document.Source.WEB:
        raise ValueError("A document of that name is already in this base.")
    Document.objects.filter(pk=document.pk).update(
        status=Document.Status.QUEUED, progress=0.0, error="", attempts=0, claimed_at=None
    )
    queue(document.pk)
    document.refresh_from_db()
    return document


def add_resources(base: KnowledgeBase, user_id: int, slug: str, uris: list[str]) -> list[Document]:
    """Queues MCP resources of one server for reading (knowledge.mcp_sources); one added again
    is read again and indexed again only if its contents changed. All or none: ValueError says
    what is wrong with the first that cannot be added."""
    from . import mcp_sources

    if not uris:
        raise ValueError("Choose at least one resource.")
    if len(uris) > MAX_RESOURCES_AT_ONCE:
        raise ValueError(f"Add at most {MAX_RESOURCES_AT_ONCE} resources at once.")
    server = mcp_sources.usable_server(user_id, slug)
    cleaned = list(dict.fromkeys(mcp_sources.clean_uri(uri) for uri in uris))
    return [_add_resource(base, server, uri) for uri in cleaned]


def add_resource(base: KnowledgeBase, user_id: int, slug: str, uri: str) -> Document:
    """One MCP resource, as `add_resources`."""
    return add_resources(base, user_id, slug, [uri])[0]


def _add_resource(base: KnowledgeBase, server: MCPServer, uri: str) -> Document:
    from . import mcp_sources

    document, _ = Document.objects.get_or_create(
        base=base,
        reference=mcp_sources.reference(server.slug, uri),
        defaults={"source": Document.Source.MCP, "title": f"{server.name}: {uri}"[:MAX_TITLE]},
    )
    if document.source != Document.Source.MCP:
        raise ValueError("A document of that name is already in this base.")
    Document.objects.filter(pk=document.pk).update(
        status=Document.Status.QUEUED, progress=0.0, error="", attempts=0, claimed_at=None
    )
    queue(document.pk)
    document.refresh_from_db()
    return document


INDEX_TASK = "knowledge.index_document"


def queue(document_id: int) -> None:
    # By name (knowledge.tasks runs `index`): the route in settings sends it to the files queue.
    transaction.on_commit(lambda: current_app.send_task(INDEX_TASK, args=[document_id]))


def stale_after() -> timedelta:
    """A claim older than this belongs to a worker that died: reading one file is bounded by
    the admin's time limit, and a document's write-up by far less than the margin."""
    return timedelta(seconds=int(FileLimits.load().extract_seconds) + settings.KNOWLEDGE_CLAIM_MARGIN_S)


def held_for(document_id: int) -> float | None:
    """Seconds until another worker's claim on the document goes stale, or None when nobody
    holds it: a second message for a document being read waits that long, then looks again."""
    claimed = (
        Document.objects.filter(pk=document_id, status=Document.Status.INDEXING)
        .values_list("claimed_at", flat=True)
        .first()
    )
    if claimed is None:
        return None
    return max(1.0, (claimed + stale_after() - timezone.now()).total_seconds() + 1)


def claim(document_id: int) -> Document | None:
    """Takes the document for this worker, or None: gone, finished, or being read by a live one."""
    now = timezone.now()
    takeable = Q(status=Document.Status.QUEUED) | Q(status=Document.Status.INDEXING, claimed_at__lt=now - stale_after())
    rows = Document.objects.filter(takeable, pk=document_id).update(
        status=Document.Status.INDEXING, claimed_at=now, attempts=F("attempts") + 1, progress=0.05
    )
    if not rows:
        return None
    document = Document.objects.select_related("base").filter(pk=document_id).first()
    if document is not None and document.attempts > MAX_ATTEMPTS:
        fail(document, "Reading this document stopped its worker several times, so it was not tried again.")
        return None
    return document


def _still_mine(document: Document) -> Q:
    return Q(pk=document.pk, status=Document.Status.INDEXING, claimed_at=document.claimed_at)


def set_progress(document: Document, progress: float) -> None:
    Document.objects.filter(_still_mine(document)).update(progress=min(0.99, progress))


def fail(document: Document, message: str) -> None:
    # A changed document that cannot be read must not keep answering with its old text.
    with transaction.atomic():
        if Document.objects.filter(_still_mine(document)).update(
            status=Document.Status.FAILED,
            error=message[:500],
            progress=1.0,
            chunk_count=0,
            indexed_hash="",
            checked_at=timezone.now(),
        ):
            Chunk.objects.filter(document_id=document.pk).delete()


def index(document_id: int) -> None:
    """The files worker's work for one document (knowledge.tasks.index_document)."""
    document = claim(document_id)
    if document is None:
        return
    limits = FileLimits.load()
    if document.source == Document.Source.WEB:
        _index_page(document, limits)
        return
    try:
        if document.source == Document.Source.MCP:
            data = _read_resource(document, limits)
            if data is None:
                return  # unchanged since it was indexed
        else:
            with document.file.open("rb") as stream:
                data = stream.read(limits.max_file_bytes + 1)
        if len(data) > limits.max_file_bytes:
            raise ExtractError(f"The file is larger than {limits.max_file_mb} MB.")
        if archives.is_zip(data) and document.source != Document.Source.MCP:
            _unpack(document, data, limits)
            return
        set_progress(document, 0.15)
        family = detect(data[:HEAD_BYTES]).family if not data.startswith(b"PK") else "docx"
        if family == "image":
            raise ExtractError("Images have no text to search; add documents (PDF, Word, HTML, Markdown, text).")
        result = run(
            data,
            family,
            document.title,
            Limits(max_pages=limits.max_pages, max_chars=limits.max_text_mb * 1024 * 1024),
            timeout_s=float(limits.extract_seconds),
        )
    except (ExtractError, Refused) as exc:
        fail(document, str(exc))
        return
    except Exception as exc:
        log.exception("Indexing knowledge document %s failed", document_id)
        fail(document, redact(f"This document could not be read ({type(exc).__name__})."))
        return
    set_progress(document, 0.5)
    passages = chunking.chunk(result.text, result.page_starts)
    if not passages:
        fail(document, "This document has no text to search (a scan without a text layer?).")
        return
    _store(document, passages, result.kind, len(result.page_starts or [0]))


def _read_resource(document: Document, limits: FileLimits) -> bytes | None:
    """An MCP resource's contents, or None when they are the ones already indexed (the document
    is then ready again as it was). Raises ExtractError with the reason it cannot be read."""
    from . import mcp_sources

    try:
        data = mcp_sources.read(document.base, document, limits)
    except mcp_sources.Unavailable as exc:
        if exc.passing and document.indexed_hash:
            # The server is down or slow for now: the passages of the last reading stand until
            # the next check rather than vanishing from search for a network hiccup.
            Document.objects.filter(_still_mine(document)).update(
                status=Document.Status.READY,
                progress=1.0,
                error=f"The last check failed ({exc}); the passages of the reading before it are searched."[:500],
                checked_at=timezone.now(),
            )
            return None
        raise ExtractError(str(exc)) from None
    content_hash = digest(data)
    Document.objects.filter(_still_mine(document)).update(
        content_hash=content_hash, size=len(data), checked_at=timezone.now()
    )
    if content_hash == document.indexed_hash:
        Document.objects.filter(_still_mine(document)).update(status=Document.Status.READY, progress=1.0, error="")
        return None
    return data


def fetch_page(url: str, limits: FileLimits) -> dict[str, Any]:
    """The page's title and readable text (headings as `#` lines), through the Web tool."""
    from toolsets.web.tools import fetch

    return asyncio.run(fetch(url, max_bytes=limits.max_file_bytes, max_chars=limits.max_text_mb * 1024 * 1024))


def _index_page(document: Document, limits: FileLimits) -> None:
    try:
        page = fetch_page(document.reference, limits)
    except ToolFailure as exc:
        fail(document, str(exc))
        return
    except Exception as exc:
        log.exception("Fetching knowledge page %s failed", document.pk)
        fail(document, redact(f"This page could not be fetched ({type(exc).__name__})."))
        return
    text = str(page.get("text") or "")
    content_hash = digest(text.encode())
    title = str(page.get("title") or "").strip()[:MAX_TITLE] or document.reference[:MAX_TITLE]
    Document.objects.filter(_still_mine(document)).update(content_hash=content_hash, title=title, size=len(text))
    if content_hash == document.indexed_hash:
        # Unchanged since it was indexed: its passages stand.
        Document.objects.filter(_still_mine(document)).update(status=Document.Status.READY, progress=1.0)
        return
    passages = chunking.chunk(text)
    if not passages:
        fail(document, "This page has no text to search.")
        return
    _store(document, passages, "html", 1)


def _store(document: Document, passages: list[chunking.Passage], kind: str, pages: int) -> None:
    rows = [
        Chunk(
            document_id=document.pk, base_id=document.base_id, position=n, heading=p.heading, page=p.page, text=p.text
        )
        for n, p in enumerate(passages)
    ]
    # Embedded before the transaction (a provider's time must not hold the document's lock);
    # without a model, or with a failing one, the passages are searched by keyword only.
    set_progress(document, 0.6)
    embedded = embedding.for_passages([embedding.passage_text(p.heading, p.text) for p in passages])
    set_progress(document, 0.9)
    with transaction.atomic():
        # Locks the row (PostgreSQL) and re-checks the claim: an upload that replaced the
        # document meanwhile, or its deletion, wins over this reading.
        if not Document.objects.select_for_update().filter(_still_mine(document)).exists():
            return
        Chunk.objects.filter(document_id=document.pk).delete()
        for start in range(0, len(rows), BATCH):
            Chunk.objects.bulk_create(rows[start : start + BATCH])
        if embedded is not None:
            vectors.write(rows, embedded[1], embedded[0])
        Document.objects.filter(_still_mine(document)).update(
            status=Document.Status.READY,
            progress=1.0,
            error="",
            kind=kind,
            pages=pages,
            chunk_count=len(rows),
            indexed_hash=F("content_hash"),
        )


def _unpack(document: Document, data: bytes, limits: FileLimits) -> None:
    """A zip's files become documents of the base under "archive.zip/path"; the zip itself,
    once unpacked, leaves nothing behind. An archive that turns out hostile half-way keeps the
    documents unpacked before, and its row says why it stopped."""
    added = 0
    try:
        for entry in archives.unpack(data, limits.max_file_bytes):
            if archives.is_zip(entry.data):
                continue  # a zip inside a zip is not opened: one level is all a base needs
            add(document.base, f"{document.reference}/{entry.path}", entry.data)
            added += 1
            set_progress(document, 0.1 + 0.8 * added / archives.MAX_ENTRIES)
    except ExtractError as exc:
        fail(document, f"{exc} ({added} files were added before that.)" if added else str(exc))
        return
    if not added:
        fail(document, "This zip file holds no documents.")
        return
    Document.objects.filter(_still_mine(document)).delete()


def requeue_unfinished() -> int:
    """Queues again every document a worker should be reading but no message may carry any
    more (the broker lost it, or its worker died): run when a files worker starts. One being
    read is queued too: its message waits until that reading ends or its claim goes stale
    (knowledge.tasks), so a worker that died just now is taken over without waiting for the
    broker to redeliver its message."""
    now = timezone.now()
    found = list(
        Document.objects.filter(
            Q(status=Document.Status.QUEUED, updated_at__lt=now - timedelta(seconds=30))
            | Q(status=Document.Status.INDEXING)
        ).values_list("pk", flat=True)[:10_000]
    )
    for document_id in found:
        queue(document_id)
    if embedding.embedding_config() is not None:
        embedding.queue_fill()  # passages a dead worker or a failing provider left unembedded
    return len(found)
