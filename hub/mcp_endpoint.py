"""The ASGI app at `/mcp` (config/asgi.py): the switch, the host and origin, the caller's token,
then Tessera's MCP server (hub/mcp_server.py) through the SDK's session manager, with the
sessions of handshake-era clients capped per caller (hub/mcp_sessions.py)."""

from __future__ import annotations

import asyncio
import io
from dataclasses import replace
from http import HTTPStatus
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from chat.models import AppSettings
from core import backoff, origins
from core.asgi import error_body

from . import oauth
from .caller import resolve
from .mcp_server import SCOPE_KEY, server
from .mcp_sessions import CappedSessionManager


class Endpoint:
    """The ASGI app at /mcp: checks the switch, the host and origin and the token, then hands the
    request to the SDK's session manager (started on first use: Daphne runs no ASGI lifespan).

    2026-07-28 requests are stateless. A handshake-era client gets a session (held by this
    process, owned by its caller, a few per caller and per user): the one way that era lets the
    server ask the client something during a call, which an ask tool's approval needs."""

    def __init__(self) -> None:
        self.manager: CappedSessionManager | None = None
        self._started: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> CappedSessionManager:
        async with self._lock:
            if self.manager is None:
                tessera = settings.TESSERA
                manager = CappedSessionManager(
                    server,
                    per_token=int(tessera["MCP_SESSIONS_PER_TOKEN"]),
                    per_user=int(tessera["MCP_SESSIONS_PER_USER"]),
                    max_sessions=int(tessera["MCP_SESSIONS_MAX"]),
                    session_idle_timeout=float(tessera["MCP_SESSION_IDLE_MINUTES"]) * 60,
                    stateless=False,
                    json_response=False,
                )
                started = asyncio.Event()

                async def run() -> None:
                    async with manager.run():
                        started.set()
                        await anyio.sleep_forever()

                self._task = asyncio.ensure_future(run())
                await asyncio.wait_for(started.wait(), 10)
                self.manager = manager
        return self.manager

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope.get("path", "").rstrip("/") != "/mcp":
            await _json(send, 404, "Not found.")
            return
        if not _host_allowed(scope):
            await _json(send, 421, "This host is not served here.")
            return
        if _origin_header(scope) and not origins.allowed(scope):
            await _json(send, 403, "Requests from this origin are not allowed.")
            return
        if not (await sync_to_async(AppSettings.load)()).mcp_server:
            await _json(send, 404, "Tessera's MCP server is switched off on this server.")
            return
        request = ASGIRequest(scope, io.BytesIO())
        caller = await sync_to_async(resolve)(request, oauth_tokens=True)
        if caller is None and (wait_s := backoff.refused(request)):
            message = f"Too many invalid tokens from your address. Try again in {wait_s} seconds."
            await _json(send, 429, message, [(b"retry-after", str(wait_s).encode())])
            return
        if caller is None:
            # Where a client finds how to get a token (RFC 9728): the MCP authorization flow.
            oauth.use_forwarded_scheme(request)
            presented = bool(request.headers.get("Authorization"))
            header = oauth.challenge(request, "invalid_token" if presented else None)
            await _json(
                send,
                401,
                "A valid token is needed: Authorization: Bearer with an API token (tsk_…) or an OAuth "
                "access token for this server.",
                [(b"www-authenticate", header.encode("latin-1"))],
            )
            return
        # Links a client opens (approval page, files, resources) point back here.
        oauth.use_forwarded_scheme(request)
        caller = replace(caller, base_url=request.build_absolute_uri("/"))
        # The SDK binds a handshake-era session to the principal that opened it: another token
        # presenting its id is answered as if it did not exist.
        principal = AccessToken(token="-", client_id=caller.principal, scopes=[], subject=str(caller.user_id))
        scope = {**scope, SCOPE_KEY: caller, "user": AuthenticatedUser(principal)}
        manager = await self._ready()
        await manager.handle_request(scope, receive, _json_rpc_errors(send))


def _json_rpc_errors(send: Any) -> Any:
    """The SDK answers some refusals at the HTTP level in plain text or with no body at all
    (a wrong Content-Type, Accept or method): a client's library reads JSON-RPC errors, so those
    become one, with the same status and headers."""
    held: dict[str, Any] | None = None
    body = b""

    async def wrapped(message: dict[str, Any]) -> None:
        nonlocal held, body
        if message["type"] == "http.response.start":
            headers = {k.lower(): v for k, v in message.get("headers") or []}
            if message["status"] >= 400 and not headers.get(b"content-type", b"").startswith(b"application/json"):
                held = message
                return
        elif message["type"] == "http.response.body" and held is not None:
            body += message.get("body", b"")
            if message.get("more_body"):
                return
            text = body.decode("utf-8", "replace").strip()[:500] or HTTPStatus(held["status"]).phrase
            shaped = error_body("/mcp", text)
            kept = [
                (k, v) for k, v in held.get("headers") or [] if k.lower() not in (b"content-type", b"content-length")
            ]
            await send(
                {
                    **held,
                    "headers": [
                        *kept,
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(shaped)).encode()),
                    ],
                }
            )
            held = None
            await send({"type": "http.response.body", "body": shaped})
            return
        await send(message)

    return wrapped


def _origin_header(scope: dict[str, Any]) -> bool:
    return any(name.lower() == b"origin" for name, _ in scope.get("headers") or [])


def _host_allowed(scope: dict[str, Any]) -> bool:
    host = next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == b"host"), "")
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


async def _json(send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    # A JSON-RPC error without an id, as the SDK answers what it refuses before any method runs.
    body = error_body("/mcp", message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            + (headers or []),
        }
    )
    await send({"type": "http.response.body", "body": body})


endpoint = Endpoint()
