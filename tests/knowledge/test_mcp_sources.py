"""MCP resources as a base's documents: read through the MCP client as the base's owner,
indexed like uploads, skipped when unchanged, and a clear failure when the server is gone."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from core import ratelimit
from knowledge import ingest, retrieval
from knowledge.models import Document
from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register


def _index(document: Document) -> None:
    """Indexes it here, or waits for the files worker of a stack this test process may also run,
    which can take the document first (then this call's claim finds it taken)."""
    ingest.index(document.pk)
    deadline = time.monotonic() + 60
    document.refresh_from_db()
    while document.status in (Document.Status.QUEUED, Document.Status.INDEXING) and time.monotonic() < deadline:
        time.sleep(0.2)
        document.refresh_from_db()


pytestmark = pytest.mark.django_db(transaction=True)
SERVER = Path(__file__).resolve().parents[1] / "toolsets" / "mcp" / "prompts_server.py"


@pytest.fixture
def server(transactional_db: Any) -> Any:
    from toolsets.mcp import catalog

    catalog.invalidate()
    yield register(name="Notes server", slug="ns", transport="stdio", **forked(SERVER))
    catalog.invalidate()


def test_a_resource_is_read_indexed_and_skipped_when_unchanged(server: Any, user: Any, make_base: Any) -> None:
    base = make_base(user)

    document = ingest.add_resource(base, user.pk, "ns", " notes://today ")
    _index(document)
    assert (document.status, document.source, document.error) == ("ready", "mcp", "")
    assert document.title == "Notes server: notes://today"
    hit = retrieval.search(user.pk, "milk")["passages"][0]
    assert "milk" in hit["text"] and hit["document"] == f"d{document.pk}"
    chunks = list(document.chunks.values_list("pk", flat=True))

    again = ingest.add_resource(base, user.pk, "ns", "notes://today")
    _index(again)
    assert again.pk == document.pk and again.status == "ready"
    assert list(again.chunks.values_list("pk", flat=True)) == chunks  # unchanged: not indexed again

    server.enabled = False
    server.save()
    Document.objects.filter(pk=document.pk).update(status="queued")
    _index(document)
    assert document.status == "failed" and "no longer enabled" in document.error


def test_only_servers_the_user_may_use_and_valid_uris(server: Any, user: Any, make_base: Any) -> None:
    base = make_base(user)
    with pytest.raises(ValueError, match="MCP servers you may use"):
        ingest.add_resource(base, user.pk, "nope", "notes://today")
    for bad in ("", "not a uri", "x" * 1000):
        with pytest.raises(ValueError, match="URI"):
            ingest.add_resource(base, user.pk, "ns", bad)

    client = Client()
    client.force_login(user)
    page = client.get(reverse("knowledge:base", args=[base.pk])).content.decode()
    assert 'data-testid="kb-add-resource"' in page and "Notes server" in page
    refused = client.post(reverse("knowledge:add_resource", args=[base.pk]), {"server": "nope", "uri": "a://b"})
    assert refused.status_code == 400
    added = client.post(reverse("knowledge:add_resource", args=[base.pk]), {"server": "ns", "uri": "notes://today"})
    assert added.status_code == 302 and Document.objects.filter(base=base, source="mcp").count() == 1


def test_a_resource_too_big_fails_clearly(server: Any, user: Any, make_base: Any) -> None:
    from toolsets.files.models import FileLimits

    limits = FileLimits.load()
    limits.max_file_mb = 1
    limits.save()
    document = ingest.add_resource(make_base(user), user.pk, "ns", "big://blob")
    _index(document)
    assert document.status == "failed" and "larger than 1 MB" in document.error


def test_resources_are_picked_from_the_servers_list_all_or_none(
    server: Any, user: Any, other_user: Any, make_base: Any
) -> None:
    base = make_base(user)
    client = Client()
    client.force_login(user)
    url = reverse("knowledge:resource_list", args=[base.pk])
    listed = client.get(url, {"server": "ns"})
    assert listed.status_code == 200
    html = listed.content.decode()
    for text in ("Today&#x27;s notes", 'value="notes://today"', 'value="images://pixel"', "Notes server lists"):
        assert text in html
    assert "weather://{country}" not in html  # a template has no single address to read
    assert client.get(url, {"server": "nope"}).status_code == 400
    stranger = Client()
    stranger.force_login(other_user)
    assert stranger.get(url, {"server": "ns"}).status_code == 404

    add = reverse("knowledge:add_resource", args=[base.pk])
    refused = client.post(add, {"server": "ns", "uri": ["notes://today", "not a uri"]})
    assert refused.status_code == 400 and not Document.objects.filter(base=base).exists()
    assert client.post(add, {"server": "ns"}).status_code == 400
    picked = client.post(add, {"server": "ns", "uri": ["notes://today", "images://pixel", "notes://today"]})
    assert picked.status_code == 302
    references = sorted(Document.objects.filter(base=base).values_list("reference", flat=True))
    assert references == ["mcp:ns:images://pixel", "mcp:ns:notes://today"]


def test_picking_too_many_or_listing_too_often_is_a_clear_4xx(
    server: Any, user: Any, make_base: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledge import views

    monkeypatch.setattr(views, "LISTS_PER_MINUTE", 2)  # each listing asks the server: seconds here
    # The three listings take seconds on a busy machine: inside one window, whenever they run.
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: 1_800_000_030.0))
    base = make_base(user)
    client = Client()
    client.force_login(user)
    add = reverse("knowledge:add_resource", args=[base.pk])
    many = [f"notes://n{n}" for n in range(ingest.MAX_RESOURCES_AT_ONCE + 1)]
    refused = client.post(add, {"server": "ns", "uri": many})
    assert refused.status_code == 400 and "at most" in refused.content.decode()
    assert not Document.objects.filter(base=base).exists()

    url = reverse("knowledge:resource_list", args=[base.pk])
    codes = [client.get(url, {"server": "ns"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_a_worker_whose_catalog_predates_the_server_reads_it_again(user: Any, make_base: Any) -> None:
    """Another process (the files worker) learns of a new server only when its catalog snapshot
    is next read, at most 2 s later; a document handed to it before then is still indexed."""
    from toolsets.mcp import catalog

    catalog.invalidate()
    catalog.toolsets()  # this process's snapshot, taken before the server exists
    before = catalog._snapshot
    register(name="Notes server", slug="ns", transport="stdio", **forked(SERVER))
    catalog._snapshot = before  # as a process that did not see the save would still hold it
    base = make_base(user)

    document = ingest.add_resource(base, user.pk, "ns", "notes://today")
    catalog._snapshot = before
    _index(document)
    assert (document.status, document.error) == ("ready", "")
    catalog.invalidate()
