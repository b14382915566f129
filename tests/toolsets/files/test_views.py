"""Uploading, status, preview, download and removal: limits, types, and owners."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from chat.models import Chat
from toolsets.files.models import Attachment, FileLimits

from . import samples

pytestmark = pytest.mark.django_db


def _upload(client: Client, name: str, data: bytes) -> Any:
    return client.post(reverse("files:upload"), {"file": SimpleUploadedFile(name, data)})


def test_upload_stores_the_file_under_a_name_of_ours_and_reports_it(client: Client, user: Any) -> None:
    client.force_login(user)
    response = _upload(client, "../../etc/Report Q3.pdf", samples.pdf(["Hello"]))
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Report Q3.pdf" and body["kind"] == "pdf" and body["status"] == "pending"
    attachment = Attachment.objects.get(pk=body["id"])
    assert attachment.owner == user and attachment.message is None
    stored = str(attachment.file.name)
    assert stored.startswith(f"u{user.pk}/") and "Report" not in stored
    assert attachment.file.storage.exists(stored)


def test_type_is_from_the_content_not_the_extension(client: Client, user: Any) -> None:
    client.force_login(user)
    assert _upload(client, "photo.pdf", samples.image()).json()["kind"] == "image"
    refused = _upload(client, "notes.txt", b"\x7fELF\x02\x01\x01" + b"\x00" * 100)
    assert refused.status_code == 415
    assert "ELF files are not supported" in refused.json()["error"]


def test_empty_file_is_refused(client: Client, user: Any) -> None:
    client.force_login(user)
    response = _upload(client, "empty.txt", b"")
    assert response.status_code == 400 and "is empty" in response.json()["error"]
    assert not Attachment.objects.exists()


def test_limits_per_file_and_per_user(client: Client, user: Any) -> None:
    client.force_login(user)
    limits = FileLimits.load()
    limits.max_file_mb = 1
    limits.max_total_mb_per_user = 2
    limits.save()
    too_big = _upload(client, "big.txt", b"x" * (1024 * 1024 + 1))
    assert too_big.status_code == 413 and "a file can be at most 1 MB" in too_big.json()["error"]
    assert _upload(client, "a.txt", b"x" * 900_000).status_code == 201
    assert _upload(client, "b.txt", b"x" * 900_000).status_code == 201
    full = _upload(client, "c.txt", b"x" * 900_000)
    assert full.status_code == 413 and "your files use 1.7 MB of your 2 MB" in full.json()["error"]
    assert Attachment.objects.count() == 2


def test_a_huge_declared_body_is_refused_before_it_is_read(client: Client, user: Any) -> None:
    client.force_login(user)
    response = client.post(
        reverse("files:upload"), data=b"x", content_type="multipart/form-data; boundary=x", CONTENT_LENGTH="999999999"
    )
    assert response.status_code == 413


def test_upload_needs_exactly_one_file(client: Client, user: Any) -> None:
    client.force_login(user)
    assert client.post(reverse("files:upload"), {}).status_code == 400


def test_status_reports_reading_then_ready_with_a_thumbnail(client: Client, user: Any) -> None:
    from toolsets.files.tasks import read_attachment

    client.force_login(user)
    body = _upload(client, "red.png", samples.image(size=(400, 300))).json()
    read_attachment(body["id"])
    status = client.get(body["status_url"]).json()
    assert status["status"] == "ready" and status["thumbnail_url"]
    thumb = client.get(status["thumbnail_url"])
    assert thumb.status_code == 200 and thumb["Content-Type"] == "image/webp"


def test_hostile_files_end_in_an_error_on_their_chip(client: Client, user: Any) -> None:
    from toolsets.files.tasks import read_attachment

    client.force_login(user)
    cases = {
        "bomb.docx": (samples.zip_bomb_docx(), "ZIP bomb"),
        "pages.pdf": (samples.million_page_pdf(), "1,000,000 pages"),
        "latin1.txt": (b"caf\xe9 au lait", "not valid UTF-8"),
    }
    for name, (data, message) in cases.items():
        body = _upload(client, name, data).json()
        read_attachment(body["id"])
        status = client.get(body["status_url"]).json()
        assert status["status"] == "failed", name
        assert message in status["error"], (name, status["error"])


def test_download_is_an_attachment_with_a_safe_type(client: Client, user: Any, attach_file: Any) -> None:
    client.force_login(user)
    html = attach_file(user, "page.svg", b"<!doctype html><html><body><script>alert(1)</script></body></html>")
    response = client.get(reverse("files:download", args=[html.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["Content-Type"] == "application/octet-stream"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]
    assert b"".join(response.streaming_content).startswith(b"<!doctype html>")  # type: ignore[attr-defined]
    pdf = attach_file(user, "a.pdf", samples.pdf(["x"]))
    assert client.get(reverse("files:download", args=[pdf.pk]))["Content-Type"] == "application/pdf"


def test_preview_marks_the_cited_passage_and_numbers_pages(client: Client, user: Any, attach_file: Any) -> None:
    client.force_login(user)
    pdf = attach_file(user, "contract.pdf", samples.pdf(["Intro <b>text</b>", "Termination needs notice."]))
    start = pdf.text.index("Termination")
    response = client.get(reverse("files:preview", args=[pdf.pk]), {"from": start, "to": start + 11})
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="page-2"' in html
    assert '<mark id="passage" data-testid="file-passage">Termination</mark>' in html
    assert "&lt;b&gt;text&lt;/b&gt;" in html  # the file's text is escaped, never markup


def test_preview_ignores_a_bad_range(client: Client, user: Any, attach_file: Any) -> None:
    client.force_login(user)
    note = attach_file(user, "a.txt", b"hello")
    for params in ({"from": "x", "to": "3"}, {"from": "3", "to": "999"}, {"from": "4", "to": "2"}):
        response = client.get(reverse("files:preview", args=[note.pk]), params)
        assert response.status_code == 200 and b"<mark" not in response.content


@pytest.mark.parametrize("view", ["preview", "status", "download", "thumbnail", "image"])
def test_another_user_cannot_reach_a_file(
    client: Client, user: Any, other_user: Any, attach_file: Any, view: str
) -> None:
    image = attach_file(user, "mine.png", samples.image())
    client.force_login(other_user)
    assert client.get(reverse(f"files:{view}", args=[image.pk])).status_code == 404
    # Guessing the next ids, or ids too large for the database, is the same 404.
    assert client.get(reverse(f"files:{view}", args=[image.pk + 1])).status_code == 404
    assert client.get(f"/files/{'9' * 18}/").status_code == 404
    assert client.get(f"/files/{'9' * 30}/").status_code == 404


def test_another_user_cannot_delete_or_send_a_file(client: Client, user: Any, other_user: Any) -> None:
    client.force_login(user)
    body = _upload(client, "a.txt", b"mine").json()
    client.force_login(other_user)
    assert client.post(body["delete_url"]).status_code == 404
    chat = Chat.objects.create(owner=other_user)
    response = client.post(reverse("chat:send", args=[chat.pk]), {"content": "read it", "attachments": [body["id"]]})
    assert response.status_code == 400 and "no longer exists" in response.content.decode()
    assert Attachment.objects.get(pk=body["id"]).message is None


def test_signed_out_users_are_sent_to_sign_in(client: Client, user: Any, attach_file: Any) -> None:
    note = attach_file(user, "a.txt", b"hello")
    assert client.get(reverse("files:download", args=[note.pk])).status_code == 302
    assert _upload(client, "a.txt", b"x").status_code == 302


def test_removing_a_draft_deletes_it_and_its_stored_bytes(
    client: Client, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    client.force_login(user)
    body = _upload(client, "a.txt", b"draft").json()
    attachment = Attachment.objects.get(pk=body["id"])
    storage, name = attachment.file.storage, str(attachment.file.name)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(body["delete_url"]).status_code == 204
    assert not Attachment.objects.filter(pk=body["id"]).exists()
    assert not storage.exists(name)


def test_a_sent_file_cannot_be_removed_on_its_own(client: Client, user: Any, attach_file: Any) -> None:
    client.force_login(user)
    sent = attach_file(user, "a.txt", b"hello")
    assert client.post(reverse("files:delete", args=[sent.pk])).status_code == 409


def test_deleting_a_chat_deletes_its_files_and_their_bytes(
    client: Client, user: Any, attach_file: Any, django_capture_on_commit_callbacks: Any
) -> None:
    client.force_login(user)
    sent = attach_file(user, "a.txt", b"hello")
    storage, name = sent.file.storage, str(sent.file.name)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("chat:delete", args=[sent.chat_id])).status_code == 200
    assert not Attachment.objects.filter(pk=sent.pk).exists()
    assert not storage.exists(name)


def test_sending_a_message_links_its_files_and_turns_the_files_tools_on(
    client: Client, user: Any, demo_model: Any
) -> None:
    client.force_login(user)
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={})
    from toolsets.files.tasks import read_attachment

    ids = []
    for name in ("a.txt", "b.png"):
        body = _upload(client, name, b"hello" if name.endswith("txt") else samples.image()).json()
        read_attachment(body["id"])
        ids.append(body["id"])
    response = client.post(
        reverse("chat:send", args=[chat.pk]), {"content": "Summarize the attached file", "attachments": ids}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('data-testid="message-file"') == 2 and "b.png" in html
    files = list(Attachment.objects.filter(pk__in=ids))
    assert {f.chat_id for f in files} == {chat.pk} and all(f.message_id for f in files)
    chat.refresh_from_db()
    assert chat.enabled_tools["files"] == ["list_files", "read_file", "search_files"]
    # The same files cannot be sent twice.
    again = client.post(reverse("chat:send", args=[chat.pk]), {"content": "again", "attachments": ids})
    assert again.status_code in (400, 409)


def test_too_many_files_for_one_message(client: Client, user: Any) -> None:
    client.force_login(user)
    limits = FileLimits.load()
    limits.max_files_per_message = 1
    limits.save()
    ids = [_upload(client, f"{n}.txt", b"x").json()["id"] for n in range(2)]
    chat = Chat.objects.create(owner=user)
    response = client.post(reverse("chat:send", args=[chat.pk]), {"content": "hi", "attachments": ids})
    assert response.status_code == 400 and "at most 1 files" in response.content.decode()


def test_a_file_that_failed_cannot_be_sent(client: Client, user: Any) -> None:
    from toolsets.files.tasks import read_attachment

    client.force_login(user)
    body = _upload(client, "bad.txt", b"\xff\xfe\xfd bad").json()
    Attachment.objects.filter(pk=body["id"]).update(status="failed", error="bad")
    read_attachment(body["id"])
    chat = Chat.objects.create(owner=user)
    response = client.post(reverse("chat:send", args=[chat.pk]), {"content": "hi", "attachments": [body["id"]]})
    assert response.status_code == 400 and "could not be read" in response.content.decode()


@pytest.mark.parametrize("value", ["abc", "-1", "0", "99999999999999999999999"])
def test_bad_attachment_ids_are_a_clear_400(client: Client, user: Any, value: str) -> None:
    client.force_login(user)
    chat = Chat.objects.create(owner=user)
    response = client.post(reverse("chat:send", args=[chat.pk]), {"content": "hi", "attachments": [value]})
    assert response.status_code == 400


def test_the_page_shows_a_messages_files_after_reload(
    client: Client, user: Any, attach_file: Any, demo_model: Any
) -> None:
    from chat.models import Turn

    client.force_login(user)
    chat = Chat.objects.create(owner=user, model=demo_model)
    image = attach_file(user, "red.png", samples.image(), chat=chat)
    turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    image.message.turn = turn
    image.message.save()
    html = client.get(reverse("chat:detail", args=[chat.pk])).content.decode()
    assert 'data-testid="message-file"' in html and "red.png" in html
    assert reverse("files:thumbnail", args=[image.pk]) in html


def test_a_page_loads_every_questions_files_in_one_query(
    client: Client, user: Any, attach_file: Any, demo_model: Any, steady_mcp_snapshot: None
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from chat.models import Message, Turn
    from toolsets.files import attach

    client.force_login(user)
    chat = Chat.objects.create(owner=user, model=demo_model)

    def exchange(name: str | None) -> None:
        turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
        question = Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content="Look")
        if name:
            attach.link([attach_file(user, name, b"some text", send=False)], question)

    def page() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            html = client.get(reverse("chat:detail", args=[chat.pk])).content.decode()
        return html, len(queries)

    exchange(None)
    page()  # the first view stores the rendered answers
    _, without = page()
    exchange("one.txt")
    page()
    html, one = page()
    assert "one.txt" in html
    for n in range(5):
        exchange(f"more-{n}.txt")
    page()
    html, many = page()
    assert all(f"more-{n}.txt" in html for n in range(5))
    # No files on the page: no query for them; any number of files: one.
    assert (without + 1, one) == (one, many), (without, one, many)
