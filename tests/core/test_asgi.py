"""core.asgi: a request crosses from the event loop to the sync thread once, whatever the
middleware, and is answered as Django's own ASGI handler answers it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from asgiref.testing import ApplicationCommunicator
from django.core.handlers.asgi import ASGIHandler

from core.asgi import SyncChainASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


def _scope(path: str, method: str = "GET") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }


async def _get(app: Any, path: str, method: str = "GET") -> tuple[int, dict[bytes, bytes], bytes]:
    talk = ApplicationCommunicator(app, _scope(path, method))
    await talk.send_input({"type": "http.request", "body": b""})
    start = await talk.receive_output(5)
    body = b""
    while True:
        part = await talk.receive_output(5)
        body += part.get("body", b"")
        if not part.get("more_body"):
            break
    return start["status"], {k.lower(): v for k, v in start["headers"]}, body


def _hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = SyncToAsync.__call__

    async def counting(self: SyncToAsync, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return seen


def test_a_page_is_one_hop_to_the_sync_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    app = SyncChainASGIHandler()
    asyncio.run(_get(app, "/login/"))  # warm: URLconf, templates
    hops = _hops(monkeypatch)
    status, headers, body = asyncio.run(_get(app, "/login/"))
    assert status == 200 and b"<form" in body
    assert b"x-request-id" in headers and b"content-security-policy" in headers
    # The view and every middleware in one; the request signals and closing the response are
    # Django's own (the connection upkeep around a request).
    assert hops.count("BaseHandler.get_response") == 1
    assert len(hops) <= 4, hops


def test_django_s_own_handler_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = asyncio.run(_get(SyncChainASGIHandler(), "/login/"))
    theirs = asyncio.run(_get(ASGIHandler(), "/login/"))
    assert ours[0] == theirs[0] == 200
    same = {b"content-type", b"x-frame-options", b"content-security-policy", b"x-content-type-options"}

    def compared(headers: dict[bytes, bytes]) -> dict[bytes, bytes]:
        # The CSP nonce is new in every response.
        return {k: re.sub(rb"'nonce-[^']+'", b"'nonce'", v) for k, v in headers.items() if k in same}

    assert compared(ours[1]) == compared(theirs[1])
    assert b"'nonce'" in compared(ours[1])[b"content-security-policy"]
    hops = _hops(monkeypatch)
    asyncio.run(_get(SyncChainASGIHandler(), "/login/"))
    ours_hops = len(hops)
    hops.clear()
    asyncio.run(_get(ASGIHandler(), "/login/"))
    # What the async chain costs, a hop for each sync-only middleware and more: why core.asgi
    # exists (the count follows the middleware list, so it is compared, not fixed).
    assert len(hops) > ours_hops + 1, hops


@pytest.mark.parametrize(("path", "method", "status"), [("/no-such-page/", "GET", 404), ("/login/", "DELETE", 403)])
def test_errors_and_missing_pages_keep_their_status(path: str, method: str, status: int) -> None:
    assert asyncio.run(_get(SyncChainASGIHandler(), path, method))[0] == status
    assert asyncio.run(_get(ASGIHandler(), path, method))[0] == status
