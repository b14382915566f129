"""Indexing in the files worker: passages stored and searchable, unchanged uploads skipped,
changed ones re-indexed, a dead worker's document taken over, hostile documents failing clearly."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from knowledge import ingest, lexical
from knowledge.models import Chunk, Document
from tests.toolsets.files import samples

pytestmark = pytest.mark.django_db

HANDBOOK = (
    b"# Handbook\n\n## Proxy\n\nThe proxy setting lives in Preferences, under Network.\n\n## Leave\n\nAsk your lead."
)


def _hits(base: Any, query: str) -> list[str]:
    ids = lexical.search(lexical.terms(query), [base.pk])
    return [c.document.reference for c in sorted(Chunk.objects.filter(pk__in=ids), key=lambda c: ids.index(c.pk))]


def test_a_markdown_document_is_chunked_under_its_headings(user: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)

    document = add_document(base, "handbook.md", HANDBOOK)

    assert (document.status, document.progress, document.chunk_count, document.indexed_hash) == (
        "ready",
        1.0,
        2,
        document.content_hash,
    )
    assert list(document.chunks.values_list("heading", flat=True)) == ["Handbook › Proxy", "Handbook › Leave"]
    assert _hits(base, "where is the proxy setting?") == ["handbook.md"]


def test_a_pdf_keeps_its_pages(user: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)

    document = add_document(
        base, "guide.pdf", samples.pdf(["Welcome to the guide.", "Firewall rules are on page two."])
    )

    assert document.status == "ready" and document.kind == "pdf" and document.pages == 2
    assert _hits(base, "firewall") == ["guide.pdf"]


def test_an_unchanged_upload_is_skipped_and_a_changed_one_reindexed(
    user: Any, make_base: Any, add_document: Any
) -> None:
    base = make_base(user)
    first = add_document(base, "handbook.md", HANDBOOK)

    same, queued = ingest.add(base, "handbook.md", HANDBOOK)
    assert (same.pk, queued) == (first.pk, False)

    changed = add_document(base, "handbook.md", b"# Handbook\n\nThe VPN is configured by IT.")
    assert changed.pk == first.pk and changed.chunk_count == 1
    assert _hits(base, "proxy") == [] and _hits(base, "vpn") == ["handbook.md"]


def test_a_document_whose_worker_died_is_taken_over(user: Any, make_base: Any) -> None:
    base = make_base(user)
    document, _ = ingest.add(base, "handbook.md", HANDBOOK)
    Document.objects.filter(pk=document.pk).update(status="indexing", claimed_at=timezone.now(), attempts=1)

    ingest.index(document.pk)  # a live worker holds it: left alone
    assert Document.objects.get(pk=document.pk).status == "indexing"

    Document.objects.filter(pk=document.pk).update(claimed_at=timezone.now() - timedelta(hours=1))
    assert ingest.requeue_unfinished() == 1
    ingest.index(document.pk)
    document.refresh_from_db()
    assert (document.status, document.attempts) == ("ready", 2)


def test_a_document_that_keeps_killing_workers_fails_for_good(user: Any, make_base: Any) -> None:
    base = make_base(user)
    document, _ = ingest.add(base, "handbook.md", HANDBOOK)
    Document.objects.filter(pk=document.pk).update(attempts=ingest.MAX_ATTEMPTS)

    ingest.index(document.pk)

    document.refresh_from_db()
    assert document.status == "failed" and "several times" in document.error


def test_a_reading_overtaken_by_a_new_upload_is_thrown_away(
    user: Any, make_base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_base(user)
    document, _ = ingest.add(base, "notes.md", b"# Old\n\nold words")
    real_chunk = ingest.chunking.chunk

    def upload_meanwhile(*args: Any) -> Any:
        ingest.add(base, "notes.md", b"# New\n\nnew words")
        return real_chunk(*args)

    monkeypatch.setattr(ingest.chunking, "chunk", upload_meanwhile)
    ingest.index(document.pk)

    document.refresh_from_db()
    assert document.status == "queued" and not document.chunks.exists()


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_a_zip_becomes_its_documents(user: Any, make_base: Any) -> None:
    base = make_base(user)
    archive, _ = ingest.add(base, "docs.zip", _zip({"a.md": HANDBOOK, "sub/b.txt": b"Plain notes about VPN."}))

    ingest.index(archive.pk)
    for document in Document.objects.filter(base=base):
        ingest.index(document.pk)

    assert dict(Document.objects.filter(base=base).values_list("reference", "status")) == {
        "docs.zip/a.md": "ready",
        "docs.zip/sub/b.txt": "ready",
    }


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("bomb.zip", _zip({"zeros.txt": b"\0" * 20_000_000}), "zip bomb"),
        ("scan.pdf", samples.pdf([""]), "no text"),
        ("broken.pdf", b"%PDF-1.4\nnot really", "could not be read"),
        ("photo.png", samples.image(), "Images have no text"),
        ("empty.zip", _zip({}), "could not be opened|no documents"),
    ],
)
def test_hostile_documents_fail_with_a_clear_error(
    user: Any, make_base: Any, add_document: Any, name: str, data: bytes, message: str
) -> None:
    document = add_document(make_base(user), name, data)

    assert document.status == "failed" and document.progress == 1.0
    assert document.error
    if message:
        import re

        assert re.search(message, document.error), document.error


def test_a_huge_file_fails_before_it_is_read(user: Any, make_base: Any, add_document: Any) -> None:
    from toolsets.files.models import FileLimits

    limits = FileLimits.load()
    limits.max_file_mb = 1
    limits.save()

    document = add_document(make_base(user), "huge.txt", b"a " * 600_000)

    assert document.status == "failed" and "larger than 1 MB" in document.error


def test_html_scripts_are_never_indexed(user: Any, make_base: Any, add_document: Any) -> None:
    page = b"<html><head><title>T</title><script>alert('x')</script></head>"
    page += b"<body><h1>Hi</h1><p>Safe text.</p></body></html>"

    document = add_document(make_base(user), "page.html", page)

    text = " ".join(document.chunks.values_list("text", flat=True))
    assert "Safe text." in text and "alert" not in text


def test_a_second_message_waits_while_another_worker_holds_the_document(user: Any, make_base: Any) -> None:
    from knowledge.tasks import index_document

    document, _ = ingest.add(make_base(user), "handbook.md", HANDBOOK)
    Document.objects.filter(pk=document.pk).update(status="indexing", claimed_at=timezone.now(), attempts=1)

    with pytest.raises(Exception) as raised:  # Celery's Retry, with the claim's remaining time
        index_document.apply(args=[document.pk], throw=True).get()
    assert type(raised.value).__name__ == "Retry"
    assert 60 < ingest.held_for(document.pk) <= ingest.stale_after().total_seconds() + 1  # type: ignore[operator]

    Document.objects.filter(pk=document.pk).update(status="queued")
    index_document.apply(args=[document.pk], throw=True).get()
    assert ingest.held_for(document.pk) is None
    assert Document.objects.get(pk=document.pk).status == "ready"


def test_a_web_page_is_fetched_indexed_and_skipped_when_unchanged(
    user: Any, make_base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = {"text": "# Setup\n\nThe proxy lives under Network.", "title": "Admin guide"}
    fetched: list[str] = []

    def fake_fetch(url: str, limits: Any) -> dict[str, Any]:
        fetched.append(url)
        return dict(pages)

    monkeypatch.setattr(ingest, "fetch_page", fake_fetch)
    base = make_base(user)
    document = ingest.add_page(base, "https://docs.example.com/admin")
    ingest.index(document.pk)
    document.refresh_from_db()
    found = (document.status, document.source, document.title, document.chunk_count)
    assert found == ("ready", "web", "Admin guide", 1)
    first_chunk = document.chunks.get().pk

    ingest.add_page(base, "https://docs.example.com/admin")
    ingest.index(document.pk)
    assert document.chunks.get().pk == first_chunk  # unchanged text: not chunked again

    pages["text"] = "# Setup\n\nThe VPN is configured by IT."
    ingest.add_page(base, "https://docs.example.com/admin")
    ingest.index(document.pk)
    assert _hits(base, "vpn") == ["https://docs.example.com/admin"] and _hits(base, "proxy") == []
    assert len(fetched) == 3


def test_a_page_at_a_private_address_is_refused_by_the_web_tools_checks(user: Any, make_base: Any) -> None:
    document = ingest.add_page(make_base(user), "http://127.0.0.1:8000/admin/")

    ingest.index(document.pk)

    document.refresh_from_db()
    assert document.status == "failed" and document.error.startswith("Blocked: 127.0.0.1 is")
