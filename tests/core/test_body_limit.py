"""Request bodies are bounded before they land (core.asgi.BodyLimit): a declared length over the
limit is refused unread, an unsized or chunked body is cut off at the limit, and an upload is
checked against the admin's largest file while it is parsed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.testing import ApplicationCommunicator
from django.test import Client

from core.asgi import BodyLimit
from toolsets.files.models import Attachment, FileLimits

MB = 1024 * 1024


class Reader:
    """An ASGI app that reads the whole body, as Django's handler does, and says how much it got."""

    def __init__(self) -> None:
        self.received = 0
        self.called = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.called = True
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # what Django does: no answer to a client that went away
            self.received += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(self.received).encode()})


def _scope(path: str = "/x/", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": headers or [], "query_string": b""}


async def _answer(talk: ApplicationCommunicator) -> tuple[int, bytes]:
    start = await talk.receive_output(5)
    body = await talk.receive_output(5)
    return start["status"], body["body"]


async def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    app = Reader()
    talk = ApplicationCommunicator(BodyLimit(app, lambda path: 1000), _scope(headers=[(b"content-length", b"1001")]))
    await talk.send_input({"type": "http.request", "body": b"x" * 10, "more_body": True})

    status, body = await _answer(talk)

    assert status == 413 and b"larger than" in body
    assert not app.called


async def test_an_unsized_body_is_cut_off_at_the_limit() -> None:
    app = Reader()
    talk = ApplicationCommunicator(BodyLimit(app, lambda path: 1000), _scope())
    for _ in range(20):  # 2 000 bytes in chunks, no length declared
        await talk.send_input({"type": "http.request", "body": b"x" * 100, "more_body": True})

    status, _ = await _answer(talk)

    assert status == 413
    assert app.received <= 1000  # what the app (Django) was handed: never past the limit


async def test_a_body_within_the_limit_passes_whole() -> None:
    app = Reader()
    talk = ApplicationCommunicator(BodyLimit(app, lambda path: 1000), _scope())
    await talk.send_input({"type": "http.request", "body": b"x" * 600, "more_body": True})
    await talk.send_input({"type": "http.request", "body": b"x" * 400})

    assert await _answer(talk) == (200, b"1000")


async def test_other_connections_pass_untouched() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    await BodyLimit(app, lambda path: 0)({"type": "websocket", "path": "/ws/"}, None, None)
    assert seen == ["websocket"]


def test_the_limit_depends_on_the_path(settings: Any) -> None:
    from core.asgi import body_limit

    settings.MAX_UPLOAD_BODY_BYTES, settings.MAX_REQUEST_BODY_BYTES = 100 * MB, 10 * MB
    assert body_limit("/files/") == 100 * MB
    assert body_limit("/chats/1/messages/") == body_limit("/files/1/") == 10 * MB


# --- Through the real web process --------------------------------------------------------------


def _chunks(total: int, size: int = 256 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        piece = min(size, total - sent)
        sent += piece
        yield b"a" * piece


@pytest.fixture
def signed_in(stack: Any, user: Any) -> httpx.Client:
    from django.conf import settings

    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    http = httpx.Client(base_url=stack.url, cookies=cookies, timeout=60)
    http.get("/")
    return http


def _send_chunked(
    url: str, path: str, total: int, headers: dict[str, str], around: tuple[bytes, bytes] = (b"", b"")
) -> tuple[bytes, int]:
    """Sends a chunked body of `total` bytes on a raw socket until the server answers: (the
    answer, how many body bytes had been sent by then)."""
    import select
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=30)
    lines = [f"POST {path} HTTP/1.1", f"Host: {where.hostname}:{where.port}", "Transfer-Encoding: chunked"]
    sock.sendall(("\r\n".join(lines + [f"{k}: {v}" for k, v in headers.items()]) + "\r\n\r\n").encode())
    sent, answer = 0, b""
    try:
        for piece in [around[0], *_chunks(total), around[1]]:
            if select.select([sock], [], [], 0)[0]:
                break
            if piece:
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            sent += len(piece)
        else:
            sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server closed while we were still sending
    sock.settimeout(30)
    while b"\r\n\r\n" not in answer:
        data = sock.recv(65536)
        if not data:
            break
        answer += data
    sock.close()
    return answer, sent


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_daphne_refuses_a_chunked_body_past_the_limit(stack: Any, signed_in: httpx.Client) -> None:
    cookies = "; ".join(f"{k}={v}" for k, v in signed_in.cookies.items())
    headers = {"Cookie": cookies, "X-CSRFToken": signed_in.cookies["csrftoken"], "Content-Type": "text/plain"}

    answer, sent = _send_chunked(stack.url, "/chats/new/", 200 * MB, headers)

    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"larger than 10 MB" in answer
    assert sent < 20 * MB  # refused as soon as it passed the limit, not after 200 MB


def _multipart(size: int, boundary: str = "tesserabound") -> tuple[bytes, bytes, str]:
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    return head, f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_an_upload_over_the_admins_limit_is_refused_while_it_is_parsed(signed_in: httpx.Client) -> None:
    """Its declared length is within the slack for the form's own bytes, so only counting the
    file as it is parsed finds it too large, before it is written anywhere."""
    FileLimits.objects.update_or_create(pk=1, defaults={"max_file_mb": 1})
    head, tail, kind = _multipart(MB + 40_000)
    body = head + b"a" * (MB + 40_000) + tail

    response = signed_in.post(
        "/files/", content=body, headers={"X-CSRFToken": signed_in.cookies["csrftoken"], "Content-Type": kind}
    )

    assert response.status_code == 413
    assert "larger than 1 MB" in response.json()["error"]
    assert not Attachment.objects.exists()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_unsized_uploads_are_refused_and_a_huge_one_is_cut_off(stack: Any, signed_in: httpx.Client) -> None:
    cookies = "; ".join(f"{k}={v}" for k, v in signed_in.cookies.items())
    head, tail, kind = _multipart(0)
    headers = {"Cookie": cookies, "X-CSRFToken": signed_in.cookies["csrftoken"], "Content-Type": kind}

    small, _ = _send_chunked(stack.url, "/files/", 2 * MB, headers, (head, tail))
    huge, sent = _send_chunked(stack.url, "/files/", 400 * MB, headers, (head, tail))

    assert small.startswith(b"HTTP/1.1 411"), small[:200]
    assert huge.startswith(b"HTTP/1.1 413") and b"larger than 100 MB" in huge
    assert sent < 120 * MB
    assert not Attachment.objects.exists()


@pytest.mark.django_db
def test_uploads_keep_their_csrf_check(user: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    checked = Client(enforce_csrf_checks=True)
    checked.force_login(user)
    response = checked.post("/files/", {"file": SimpleUploadedFile("a.txt", b"hello")})
    assert response.status_code == 403
