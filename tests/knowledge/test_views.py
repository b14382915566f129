"""The Knowledge pages: create, upload (queued for the files worker), poll progress, share,
delete; another user's base is a 404 and a shared one is read-only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from knowledge import ingest
from knowledge.models import Document, KnowledgeBase

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_for(db: Any) -> Any:
    def make(user: Any) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


def test_create_a_base_and_refuse_a_blank_or_duplicate_name(user: Any, client_for: Any) -> None:
    client = client_for(user)

    response = client.post(reverse("knowledge:create"), {"name": "  Handbook ", "description": "Team docs"})
    base = KnowledgeBase.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == reverse("knowledge:base", args=[base.pk])
    assert base.name == "Handbook"

    assert client.post(reverse("knowledge:create"), {"name": " "}).status_code == 400
    duplicate = client.post(reverse("knowledge:create"), {"name": "Handbook"})
    assert duplicate.status_code == 400 and "already have" in duplicate.content.decode()
    assert b"Handbook" in client.get(reverse("knowledge:index")).content


def test_upload_queues_documents_and_the_table_polls_until_done(
    user: Any, client_for: Any, make_base: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    sent: list[Any] = []
    monkeypatch.setattr(ingest.current_app, "send_task", lambda name, args: sent.append((name, args)))
    base = make_base(user)
    client = client_for(user)
    files = [SimpleUploadedFile("a.md", b"# A\n\nalpha"), SimpleUploadedFile("b.txt", b"beta")]

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("knowledge:upload", args=[base.pk]), {"files": files})

    assert response.status_code == 302
    documents = list(Document.objects.filter(base=base))
    assert sorted(d.reference for d in documents) == ["a.md", "b.txt"]
    assert sorted(args[0] for _, args in sent) == sorted(d.pk for d in documents)
    table = client.get(reverse("knowledge:documents", args=[base.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in table and "Indexing: 0 of 2 done" in table

    for document in documents:
        ingest.index(document.pk)
    table = client.get(reverse("knowledge:documents", args=[base.pk])).content.decode()
    assert "hx-trigger" not in table and "2 of 2 ready" in table


def test_an_empty_or_oversized_upload_is_refused(user: Any, client_for: Any, make_base: Any) -> None:
    from toolsets.files.models import FileLimits

    limits = FileLimits.load()
    limits.max_file_mb = 1
    limits.save()
    base = make_base(user)
    client = client_for(user)

    assert client.post(reverse("knowledge:upload", args=[base.pk])).status_code == 400
    big = SimpleUploadedFile("big.txt", b"x" * (2 * 1024 * 1024))
    assert client.post(reverse("knowledge:upload", args=[base.pk]), {"files": [big]}).status_code == 413


def test_another_users_base_is_a_404_and_a_shared_one_read_only(
    user: Any, other_user: Any, client_for: Any, make_base: Any, add_document: Any
) -> None:
    base = make_base(user)
    document = add_document(base, "a.md", b"# A\n\nalpha")
    other = client_for(other_user)

    for url in [reverse("knowledge:base", args=[base.pk]), reverse("knowledge:document", args=[document.pk])]:
        assert other.get(url).status_code == 404

    team = Group.objects.create(name="Team")
    other_user.groups.add(team)
    base.groups.set([team])
    assert other.get(reverse("knowledge:base", args=[base.pk])).status_code == 200
    assert other.get(reverse("knowledge:document", args=[document.pk])).status_code == 200
    upload = SimpleUploadedFile("x.md", b"x")
    assert other.post(reverse("knowledge:upload", args=[base.pk]), {"files": [upload]}).status_code == 404
    assert other.post(reverse("knowledge:delete_document", args=[document.pk])).status_code == 404
    assert other.post(reverse("knowledge:delete", args=[base.pk])).status_code == 404
    assert Document.objects.filter(pk=document.pk).exists()


def test_sharing_only_with_the_owners_groups(user: Any, client_for: Any, make_base: Any) -> None:
    mine, theirs = Group.objects.create(name="Mine"), Group.objects.create(name="Theirs")
    user.groups.add(mine)
    base = make_base(user)
    client = client_for(user)

    assert client.post(reverse("knowledge:share", args=[base.pk]), {"groups": [theirs.pk]}).status_code == 400
    assert client.post(reverse("knowledge:share", args=[base.pk]), {"groups": ["x"]}).status_code == 400
    assert client.post(reverse("knowledge:share", args=[base.pk]), {"groups": [mine.pk]}).status_code == 200
    assert list(base.groups.all()) == [mine]


def test_document_text_is_escaped_and_the_cited_passage_marked(
    user: Any, client_for: Any, make_base: Any, add_document: Any
) -> None:
    document = add_document(make_base(user), "notes.md", b"# <b>Title</b>\n\nUse <script>alert(1)</script> carefully.")
    chunk = document.chunks.get()

    page = client_for(user).get(reverse("knowledge:document", args=[document.pk]), {"passage": chunk.pk})

    html = page.content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;Title&lt;/b&gt;" in html and 'data-testid="kb-marked"' in html


def test_deleting_a_base_removes_its_documents(user: Any, client_for: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)
    add_document(base, "a.md", b"alpha")

    response = client_for(user).post(reverse("knowledge:delete", args=[base.pk]))

    assert response.status_code == 302 and not Document.objects.exists()


def test_adding_a_page_queues_it_and_a_bad_address_is_refused(user: Any, client_for: Any, make_base: Any) -> None:
    base = make_base(user)
    client = client_for(user)

    for bad in ["", "javascript:alert(1)", "ftp://example.com/x", "https://" + "a" * 2000 + ".com"]:
        assert client.post(reverse("knowledge:add_page", args=[base.pk]), {"url": bad}).status_code == 400
    response = client.post(reverse("knowledge:add_page", args=[base.pk]), {"url": "https://example.com/guide"})

    assert response.status_code == 302
    assert list(Document.objects.values_list("source", "status")) == [("web", "queued")]
