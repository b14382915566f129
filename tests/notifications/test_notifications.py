"""The notification centre: the count in the bell, opening one (its owner only; marks it read and
follows a link inside Tessera only), marking all read, e-mail through the mail backend, and the
user socket pushing the bell and the new item to the user's pages only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core import mail
from django.test import Client

from config.asgi import application
from notifications.models import Notification
from notifications.service import notify, unread_count

pytestmark = pytest.mark.django_db(transaction=True)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_centre_open_and_read_all(user: Any, other_user: Any) -> None:
    user.email = "alice@example.com"
    user.save()
    first = notify(user.pk, "run_completed", "Digest finished", "All good", "/automations/")
    notify(user.pk, "run_failed", "Digest failed", "Provider down", "https://evil.example/")
    assert unread_count(user.pk) == 2
    assert [m.to for m in mail.outbox] == [["alice@example.com"], ["alice@example.com"]]
    assert "http://127.0.0.1:8000/automations/" in mail.outbox[0].body

    client = _client(user)
    page = client.get("/notifications/").content.decode()
    assert "Digest finished" in page and 'data-testid="notify-count">2<' in page
    assert _client(other_user).post(f"/notifications/{first.pk}/open/").status_code == 404
    opened = client.post(f"/notifications/{first.pk}/open/")
    assert opened.status_code == 302 and opened["Location"] == "/automations/"
    assert unread_count(user.pk) == 1
    outside = Notification.objects.exclude(pk=first.pk).get()
    assert client.post(f"/notifications/{outside.pk}/open/")["Location"] == "/notifications/"
    notify(user.pk, "other", "Third")
    client.post("/notifications/read-all/")
    assert unread_count(user.pk) == 0 and not Notification.objects.filter(read=False).exists()
    assert client.get("/notifications/read-all/").status_code == 405


def _cookie(user: Any) -> bytes:
    client = _client(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def _socket(cookie: bytes) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)]
    return WebsocketCommunicator(application, "/ws/notifications/", headers=headers)


def test_the_user_socket_pushes_to_its_user_only(user: Any, other_user: Any) -> None:
    mine_cookie, their_cookie = _cookie(user), _cookie(other_user)

    async def run() -> tuple[str, bool]:
        mine, theirs = _socket(mine_cookie), _socket(their_cookie)
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        from asgiref.sync import sync_to_async

        await sync_to_async(notify)(user.pk, "run_waiting", "Waits for you", "Approve it", "/chats/1/")
        frame = await mine.receive_from(timeout=5)
        quiet = await theirs.receive_nothing(timeout=0.5)
        await mine.disconnect()
        await theirs.disconnect()
        return frame, quiet

    frame, quiet = asyncio.run(run())
    assert 'id="notify-bell"' in frame and 'hx-swap-oob="true"' in frame and "Waits for you" in frame
    assert 'hx-swap-oob="afterbegin:#notes"' in frame and quiet


def test_a_title_with_line_breaks_is_still_mailed(user: Any) -> None:
    # An automation's name may hold a line break; a mail subject may not (BadHeaderError).
    user.email = "alice@example.com"
    user.save()
    notify(user.pk, "run_completed", "“Daily\r\ndigest\nBcc: x@evil.example” finished", "All good", "/automations/")
    assert [m.subject for m in mail.outbox] == ["[Tessera] “Daily digest Bcc: x@evil.example” finished"]
