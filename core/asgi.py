"""Django's ASGI handler with its middleware chain run synchronously: one hop from the event
loop to the sync thread per request.

Every Tessera view is synchronous. In its async mode Django runs each sync-only hook of each
middleware (process_request, process_view, process_response of the session, CSRF, auth,
messages… middleware) through its own `sync_to_async`: about 36 hops between the event loop and
the sync thread for one send, each copying and restoring every context variable. That was about
a third of a send's CPU in the web process (bench/RESULTS.md), and a send is what the web
process is busiest with when many chats start at once. Here the whole chain and the view run in
one hop, as under WSGI; the rest (reading the body, the request signals, sending the response,
a client that disconnects) is Django's ASGI handler as it is.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest


class SyncChainASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)
        # Sync mode: the chain is plain calls; an async view (none so far) would be run by
        # Django's sync path through async_to_sync.
        self.load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> Any:
        # Thread-sensitive, as Django runs sync views: one thread for all of them, where
        # database connections and thread-locals stay put.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


def get_application() -> SyncChainASGIHandler:
    import django

    django.setup(set_prefix=False)
    return SyncChainASGIHandler()


class BodyLimit:
    """Caps every HTTP request body before Django buffers it.

    Django's ASGI handler reads a whole body into a spooled temporary file (memory, then disk)
    before any view or size check runs, however large it is and whether or not it declared a
    length (a chunked upload declares none). Here a declared length over the path's limit is
    answered 413 at once, unread; an undeclared one is counted as it arrives and cut off at the
    limit (Django then sees a client that went away and answers nothing; this answers 413)."""

    def __init__(self, app: Any, limit_for: Any = None) -> None:
        self.app = app
        self.limit_for = limit_for or body_limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _too_large(send, limit, scope["path"])
            return
        received = 0
        over = started = False

        async def bounded_receive() -> dict[str, Any]:
            nonlocal received, over
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request" and not over:
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, bounded_receive, watched_send)
        if over and not started:
            await _too_large(send, limit, scope["path"])


def body_limit(path: str) -> int:
    from django.conf import settings

    upload = path in settings.UPLOAD_PATHS
    return int(settings.MAX_UPLOAD_BODY_BYTES if upload else settings.MAX_REQUEST_BODY_BYTES)


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers") or []:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def error_body(path: str, message: str) -> bytes:
    """An error in the shape the path's clients read: OpenAI's under /v1/ (hub/openai.py),
    JSON-RPC's at /mcp (hub/mcp_server.py), else a plain {"error": message}."""
    if path.startswith("/v1/"):
        shaped: dict[str, Any] = {
            "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
        }
    elif path.rstrip("/") == "/mcp":
        shaped = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    else:
        shaped = {"error": message}
    return json.dumps(shaped).encode()


async def _too_large(send: Any, limit: int, path: str = "") -> None:
    body = error_body(path, f"The request body is larger than {limit // (1024 * 1024)} MB.")
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class PathRouter:
    """Hands an HTTP request to the app of the first path prefix it starts with, else to
    `default`."""

    def __init__(self, prefixes: dict[str, Any], default: Any) -> None:
        self.prefixes = list(prefixes.items())
        self.default = default

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        for prefix, app in self.prefixes:
            if path.startswith(prefix):
                await app(scope, receive, send)
                return
        await self.default(scope, receive, send)
