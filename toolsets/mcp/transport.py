"""How a connection reaches its MCP server: a stdio subprocess, or HTTP (streamable or the older
SSE) with the caller's headers, the OAuth provider where the server uses OAuth, and a hook that
sees every response's status. Every answer is bounded as it streams in: a stdio server's by
stdio_guard.py, an HTTP server's by bounded.py and the SDK's per-event bound for event streams."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
from django.conf import settings
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from . import bounded
from .catalog import ServerSpec
from .models import MCPServer

if TYPE_CHECKING:
    # For the annotation only: the module imports oauth where it is used.
    from .oauth_providers import RuntimeProvider

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# How a server refuses a request for its session id (the spec: 404 for a session it no longer
# has; the TypeScript SDK's servers: 400 "No valid session ID provided"). What each SDK's
# transport makes of it differs (the Python one says "Session terminated", on a 400 only
# "Server returned an error response"), so the status is what counts, not any wording.
SESSION_REFUSED = (400, 404)

GUARD = Path(__file__).with_name("stdio_guard.py")

OnResponse = Callable[[httpx2.Response], Awaitable[None]]


def session_refused(request: httpx2.Request, response: httpx2.Response) -> bool:
    """The server refused a request that carried a session id: it cannot have run it."""
    return response.status_code in SESSION_REFUSED and bool(request.headers.get("mcp-session-id"))


def open_transport(
    spec: ServerSpec,
    headers: tuple[tuple[str, str], ...],
    auth: httpx2.Auth | None,
    stack: AsyncExitStack,
    on_response: OnResponse,
) -> Any:
    """The SDK transport for `spec` (its HTTP client closes with `stack`)."""
    if spec.transport == MCPServer.Transport.STDIO:
        # The guard runs the command: one that is not there is told as such here, as the SDK would.
        search = dict(spec.env).get("PATH") or os.environ.get("PATH")
        if shutil.which(spec.command, path=search) is None:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", spec.command)
        # Through the guard (stdio_guard.py), which refuses an oversized message as it streams in.
        guarded = [str(GUARD), str(max_message_bytes()), "--", spec.command, *spec.args]
        params = StdioServerParameters(command=sys.executable, args=["-S", *guarded], env=dict(spec.env) or None)
        return stdio_client(params)
    hooks = event_hooks(spec, on_response)
    if spec.transport == MCPServer.Transport.SSE:

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return httpx2.AsyncClient(
                headers={**bounded.HEADERS, **(headers or {})},
                timeout=timeout or HTTP_TIMEOUT,
                auth=auth,
                event_hooks=hooks,
            )

        return sse_client(spec.url, headers=dict(headers), auth=auth, httpx_client_factory=factory)
    http = httpx2.AsyncClient(
        headers={**bounded.HEADERS, **dict(headers)}, auth=auth, timeout=HTTP_TIMEOUT, event_hooks=hooks
    )
    stack.push_async_callback(http.aclose)
    return streamable_http_client(spec.url, http_client=http, max_sse_event_size=max_message_bytes())


def max_message_bytes() -> int:
    """The largest message a server may send: the largest page it may serve, JSON-escaped
    (at most twice its size, for HTML), with room to spare; at least a generous tool result."""
    return max(
        int(settings.TESSERA["MCP_STDIO_MAX_MESSAGE_BYTES"]), 2 * int(settings.TESSERA["MCP_APP_MAX_BYTES"]) + 100_000
    )


def event_hooks(spec: ServerSpec, on_response: Any) -> dict[str, list[Any]]:
    # The bound first: what the other hooks and the SDK read of a body is what it lets through.
    hooks: dict[str, list[Any]] = {"response": [bounded.hook(max_message_bytes()), on_response]}
    if spec.credential == MCPServer.Credential.OAUTH:
        from . import oauth

        # The OAuth provider's own requests (metadata, the token endpoint when it refreshes)
        # go through this client: the same address checks as the user's Connect, so a
        # server's metadata cannot point a worker at its own network.
        hooks["request"] = [oauth.guard_hook(spec)]
    return hooks


def oauth_provider(spec: ServerSpec, user_id: int) -> RuntimeProvider:
    """The httpx auth that sends `user_id`'s OAuth grant for `spec` (and refreshes it)."""
    from . import oauth_providers

    return oauth_providers.runtime_provider(spec, user_id)
