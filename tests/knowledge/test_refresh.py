"""MCP-resource documents kept current (knowledge/refresh.py): read again through a real MCP
server process once older than the admin's interval, a bounded slice per beat tick; a changed
resource indexed again, an unchanged one left as it was, a removed one failed with the reason,
a server down for now leaving the last passages searchable; and the owner's "Refresh now"."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from knowledge import ingest, refresh, retrieval, views
from knowledge.models import Document, RetrievalSettings
from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import Restartable, register

SERVER = Path(__file__).with_name("folder_server.py")
HOUR_AGO = timedelta(minutes=61)


def _settle(document: Document) -> Document:
    """Reads it here, or waits for the files worker of a stack this test process may also run,
    which can take the document first (then this call's claim finds it taken)."""
    ingest.index(document.pk)
    deadline = time.monotonic() + 60
    document.refresh_from_db()
    while document.status in (Document.Status.QUEUED, Document.Status.INDEXING):
        assert time.monotonic() < deadline, f"document {document.pk} still {document.status}"
        time.sleep(0.2)
        document.refresh_from_db()
    return document


def _age(*documents: Document, by: timedelta = HOUR_AGO) -> None:
    Document.objects.filter(pk__in=[d.pk for d in documents]).update(checked_at=timezone.now() - by)


def _chunks(document: Document) -> list[int]:
    return list(document.chunks.order_by("position").values_list("pk", flat=True))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "a.md").write_text("# Alpha\n\nThe kettle is in the kitchen.\n")
    (tmp_path / "b.md").write_text("# Beta\n\nThe ladder is in the garage.\n")
    return tmp_path


@pytest.fixture
def server(transactional_db: Any, folder: Path) -> Any:
    from toolsets.mcp import catalog

    catalog.invalidate()
    arguments = [str(SERVER), str(folder)]
    yield register(name="Folder", slug="fold", transport="stdio", **forked(*arguments))
    catalog.invalidate()


@pytest.mark.django_db(transaction=True)
def test_a_tick_reindexes_changed_resources_leaves_unchanged_ones_and_fails_removed_ones(
    server: Any, folder: Path, user: Any, make_base: Any
) -> None:
    base = make_base(user)
    alpha = _settle(ingest.add_resource(base, user.pk, "fold", "docs://a.md"))
    beta = _settle(ingest.add_resource(base, user.pk, "fold", "docs://b.md"))
    assert (alpha.status, beta.status) == ("ready", "ready"), (alpha.error, beta.error)
    assert alpha.checked_at is not None
    alpha_chunks, beta_chunks = _chunks(alpha), _chunks(beta)

    # Checked a minute ago: not due under the default hourly interval.
    assert refresh.tick() == 0
    (folder / "a.md").write_text("# Alpha\n\nThe kettle moved to the pantry.\n")
    _age(alpha, beta)
    assert refresh.tick() == 2
    alpha, beta = _settle(alpha), _settle(beta)

    assert alpha.status == "ready" and _chunks(alpha) != alpha_chunks
    hit = retrieval.search(user.pk, "pantry")["passages"][0]
    assert hit["document"] == f"d{alpha.pk}" and "pantry" in hit["text"]
    assert retrieval.search(user.pk, "kitchen")["count"] == 0  # the old text is gone from search
    # Unchanged: the same passages (so the same vectors), only its check time moved.
    assert (beta.status, beta.error) == ("ready", ""), beta.error
    assert _chunks(beta) == beta_chunks
    assert beta.checked_at is not None and beta.checked_at > timezone.now() - timedelta(minutes=1)

    (folder / "b.md").unlink()
    _age(alpha, beta)
    refresh.tick()
    beta = _settle(beta)
    assert beta.status == "failed" and "gone" in beta.error and "docs://b.md" in beta.error
    assert Document.objects.filter(pk=beta.pk).exists() and not beta.chunks.exists()
    assert retrieval.search(user.pk, "ladder")["count"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_server_down_for_now_keeps_the_last_passages_and_says_so(
    server: Any, folder: Path, user: Any, make_base: Any
) -> None:
    base = make_base(user)
    alpha = _settle(ingest.add_resource(base, user.pk, "fold", "docs://a.md"))
    chunks = _chunks(alpha)
    server.command = str(folder / "no-such-server")
    server.save()

    assert refresh.refresh_base(base) == 1
    alpha = _settle(alpha)

    assert alpha.status == "ready" and _chunks(alpha) == chunks
    assert "The last check failed" in alpha.error and "unreachable" in alpha.error
    assert retrieval.search(user.pk, "kettle")["count"] == 1


@pytest.fixture
def legacy_folder_server(folder: Path) -> Iterator[Restartable]:
    """The folder server over streamable HTTP as a handshake-era server (its notifications
    arrive on the session unasked)."""
    process = Restartable(SERVER, "http", "{port}", str(folder), env={"MCP_LEGACY_ONLY": "1"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.django_db(transaction=True)
def test_a_change_the_server_announces_reads_its_documents_again(
    legacy_folder_server: Restartable, folder: Path, user: Any, make_base: Any
) -> None:
    from toolsets.mcp import catalog
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.client import access_for
    from toolsets.mcp.connection import Connection

    catalog.invalidate()
    url = f"http://127.0.0.1:{legacy_folder_server.port}/mcp"
    server = register(name="Folder", slug="fold", transport="http", url=url)
    base = make_base(user)
    alpha = _settle(ingest.add_resource(base, user.pk, "fold", "docs://a.md"))
    beta = _settle(ingest.add_resource(base, user.pk, "fold", "docs://b.md"))
    beta_checked = beta.checked_at
    (folder / "a.md").write_text("# Alpha\n\nThe kettle moved to the pantry.\n")
    spec = ServerSpec.of(server)

    async def announce(name: str, watched: list[Document]) -> None:
        connection = Connection(spec, access_for(spec, user.pk, ""))
        try:
            await connection.call("announce", {"name": name}, None, 10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # handled on the connection's message loop
                statuses = await sync_to_async(
                    lambda: [d.status for d in Document.objects.filter(pk__in=[w.pk for w in watched])]
                )()
                if "ready" not in statuses:
                    return
                await asyncio.sleep(0.1)
        finally:
            await connection.close()

    async_to_sync(announce)("a.md", [alpha])
    alpha = _settle(alpha)
    assert retrieval.search(user.pk, "pantry")["passages"][0]["document"] == f"d{alpha.pk}"
    beta.refresh_from_db()
    assert beta.status == "ready" and beta.checked_at == beta_checked  # not announced: not read

    (folder / "b.md").unlink()
    async_to_sync(announce)("", [alpha, beta])  # the list changed: every document of the server
    alpha, beta = _settle(alpha), _settle(beta)
    assert alpha.status == "ready" and beta.status == "failed" and "gone" in beta.error
    catalog.invalidate()


def _mcp_document(base: Any, n: int, checked_ago: timedelta | None, status: str = "ready") -> Document:
    return Document.objects.create(
        base=base,
        source=Document.Source.MCP,
        reference=f"mcp:fold:docs://{n}.md",
        title=f"Folder: docs://{n}.md",
        status=status,
        checked_at=None if checked_ago is None else timezone.now() - checked_ago,
    )


@pytest.mark.django_db
def test_each_tick_queues_a_bounded_slice_oldest_first_and_skips_documents_being_read(
    user: Any, make_base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings, "KNOWLEDGE_REFRESH_PER_TICK", 3)
    base = make_base(user)
    fresh = _mcp_document(base, 0, timedelta(minutes=5))
    reading = _mcp_document(base, 1, timedelta(days=3), status="indexing")
    due = [_mcp_document(base, n, timedelta(hours=n)) for n in range(2, 8)]  # 2 h … 7 h ago
    never = _mcp_document(base, 9, None)
    upload = Document.objects.create(base=base, reference="notes.md", title="notes.md", status="ready")

    # One document is being read already: two more fit this tick, never checked first, then the oldest.
    assert refresh.tick() == 2
    queued = set(Document.objects.filter(status="queued").values_list("pk", flat=True))
    assert queued == {never.pk, due[-1].pk}
    assert Document.objects.get(pk=reading.pk).status == "indexing"
    # The queued ones still wait: the next tick adds none.
    assert refresh.tick() == 0

    Document.objects.filter(status__in=["queued", "indexing"]).update(status="ready", checked_at=timezone.now())
    assert refresh.tick() == 3
    assert set(Document.objects.filter(status="queued").values_list("pk", flat=True)) == {d.pk for d in due[2:5]}
    assert Document.objects.get(pk=fresh.pk).status == "ready" and Document.objects.get(pk=upload.pk).status == "ready"


@pytest.mark.django_db
def test_an_interval_of_zero_turns_the_periodic_check_off_but_not_refresh_now(user: Any, make_base: Any) -> None:
    row = RetrievalSettings.load()
    row.mcp_refresh_minutes = 0
    row.save()
    base = make_base(user)
    stale = _mcp_document(base, 1, timedelta(days=30))

    assert refresh.tick() == 0 and Document.objects.get(pk=stale.pk).status == "ready"
    assert refresh.refresh_base(base) == 1 and Document.objects.get(pk=stale.pk).status == "queued"


def test_the_check_is_in_the_beat_schedule_and_runs_in_the_files_queue() -> None:
    from config.celery import app
    from knowledge import tasks

    entries = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == refresh.REFRESH_TASK]
    assert len(entries) == 1 and entries[0]["schedule"] == settings.KNOWLEDGE_REFRESH_TICK_S
    assert tasks.refresh_resources.name == refresh.REFRESH_TASK and refresh.REFRESH_TASK in app.tasks
    assert settings.CELERY_TASK_ROUTES[refresh.REFRESH_TASK]["queue"] == settings.FILES_QUEUE


@pytest.mark.django_db
def test_refresh_now_is_the_owners_alone(
    user: Any, other_user: Any, make_base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = Group.objects.create(name="Team")
    other_user.groups.add(team)
    base = make_base(user, groups=[team])
    document = _mcp_document(base, 1, timedelta(minutes=1))
    url = reverse("knowledge:refresh", args=[base.pk])

    member = Client()
    member.force_login(other_user)
    assert member.post(url).status_code == 404  # a shared base can be searched, not refreshed
    page = member.get(reverse("knowledge:base", args=[base.pk])).content.decode()
    assert 'data-testid="kb-checked"' in page and 'data-testid="kb-refresh-now"' not in page
    assert Document.objects.get(pk=document.pk).status == "ready"

    owner = Client()
    owner.force_login(user)
    assert owner.get(url).status_code == 405
    answer = owner.post(url)
    assert answer.status_code == 200 and "Checking 1 MCP resource again." in answer.content.decode()
    assert Document.objects.get(pk=document.pk).status == "queued"
    assert "every MCP resource of this base is being read already" in owner.post(url).content.decode()
    assert owner.post(reverse("knowledge:refresh", args=[base.pk + 1000])).status_code == 404
    empty = make_base(user, name="Uploads only")
    assert (
        "no documents from MCP resources" in owner.post(reverse("knowledge:refresh", args=[empty.pk])).content.decode()
    )
    # Over the owner's presses a minute (none allowed here): refused, nothing queued.
    Document.objects.filter(pk=document.pk).update(status="ready")
    monkeypatch.setattr(views, "REFRESHES_PER_MINUTE", 0)
    assert owner.post(url).status_code == 429 and Document.objects.get(pk=document.pk).status == "ready"
