"""The sessions of handshake-era clients at `/mcp`, capped per caller.

The SDK's session manager keeps up to 10 000 sessions per process, shared by everyone, each
living until 30 idle minutes pass: one token could open them all. Here each caller (an API
token, or an OAuth client: its tokens refresh, it stays one caller) and each user may hold only
so many at once (settings.TESSERA["MCP_SESSIONS_PER_TOKEN"], ["MCP_SESSIONS_PER_USER"]). A new
session beyond a cap closes that caller's (or user's) oldest idle session first, as a browser
drops its least recently used connection; if every one of them is busy with a call, the new
one is refused (429) rather than cutting a call short.

"Idle" means no call in flight: a client's open GET stream (which the official clients keep
open for the whole session) does not count, or no session would ever be idle. Sessions live in
the web process that opened them, so the caps hold per web process (as the sessions do).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from core.asgi import error_body

log = logging.getLogger(__name__)


class SessionsFull(Exception):
    """Every session of this caller (or user) is busy with a call: none can be closed."""


@dataclass
class _Use:
    opened: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)  # when its last call ended (or it opened)
    calls: int = 0  # requests in flight other than its GET stream


class CappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with sessions capped per caller and per user."""

    def __init__(self, app: Any, *, per_token: int, per_user: int, **options: Any) -> None:
        if per_token <= 0 or per_user <= 0:
            raise ValueError("MCP session caps must be positive")
        super().__init__(app, **options)
        self.per_token, self.per_user = per_token, per_user
        self._uses: dict[str, _Use] = {}

    async def _handle_stateful_request(self, scope: Any, receive: Any, send: Any) -> None:
        session_id = _header(scope, MCP_SESSION_ID_HEADER) or ""
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        use = self._uses.get(session_id)
        # Only its own caller's calls keep a session from being idle (the SDK refuses the rest).
        if use is not None and (scope.get("method") == "GET" or requestor != self._session_owners.get(session_id)):
            use = None
        if use is not None:
            use.calls += 1
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except SessionsFull as full:
            await _refuse(send, str(full))
        finally:
            if use is not None:
                use.calls -= 1
                use.last = time.monotonic()

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # Called under the SDK's session-creation lock, with nothing awaited: no two new sessions
        # of one caller can both find room.
        if requestor is not None:
            self._make_room("client_id", requestor["client_id"], self.per_token, "this token")
            self._make_room("subject", requestor["subject"], self.per_user, "your account")
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self._uses[transport.mcp_session_id] = _Use()
        return transport

    def _make_room(self, key: str, value: str | None, cap: int, whose: str) -> None:
        held = [sid for sid, owner in self._session_owners.items() if owner.get(key) == value]
        while len(held) >= cap:
            idle = [sid for sid in held if not self._uses.get(sid, _Use()).calls]
            if not idle:
                raise SessionsFull(
                    f"Too many open MCP sessions for {whose} ({cap}), all of them busy with a call: "
                    "end one (DELETE with its Mcp-Session-Id) or wait for a call to finish."
                )
            oldest = min(idle, key=lambda sid: self._uses.get(sid, _Use(0.0, 0.0)).last)
            self._close(oldest)
            held.remove(oldest)

    def _close(self, session_id: str) -> None:
        """Forgets a session at once (its id answers 404 from now on) and ends it in the background."""
        transport = self._server_instances.pop(session_id, None)
        self._session_owners.pop(session_id, None)
        self._uses.pop(session_id, None)
        log.info("Closed the idle MCP session %s to make room for a new one of its caller", session_id[:12])
        if transport is not None and not transport.is_terminated and self._task_group is not None:
            self._task_group.start_soon(_terminate, transport)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._uses.pop(session_id, None)
        await super()._discard_session(session_id, transport)

    def open_sessions(self) -> int:
        return len(self._server_instances)


async def _terminate(transport: StreamableHTTPServerTransport) -> None:
    with anyio.CancelScope(shield=True):
        await transport.terminate()


def _header(scope: Any, name: str) -> str | None:
    wanted = name.lower().encode("latin-1")
    return next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == wanted), None)


async def _refuse(send: Any, message: str) -> None:
    body = error_body("/mcp", message)
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
