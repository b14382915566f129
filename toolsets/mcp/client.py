"""Connections to MCP servers, one set per event loop (a worker process has one loop: see
chat.worker.loop), shared by every turn the loop runs.

- A server's connection is made on first use and then reused: one per server for shared
  servers, one per user for servers with per-user credentials (bounded, idle ones closed).
- A stdio server is one child process per worker process. When it dies it is started again
  after a backoff (1 s, doubling to 60 s; back to 1 s once it stayed up a minute). A remote
  server is reconnected by the next call that needs it, after the same backoff.
- A call waits for its own answer only: a server that hangs costs that call its timeout, and
  one that dies fails the calls it had in flight ("closed the connection") — never anything
  else on the loop. Cancelling a call (the executor's timeout, Stop) cancels the request: the
  SDK sends the protocol's `notifications/cancelled` before the cancellation goes on.
- A tool-list change makes the connection list the tools again and store them: the handshake
  era's `notifications/tools/list_changed`, or a 2026 server's `subscriptions/listen` stream.
- Sessions heal: a handshake-era server that no longer knows the session (restarted, reaped:
  404 "session not found", 400 "no valid session") gets a new one, and the call that it refused
  (so cannot have run) is sent once more; a pooled session idle for a while is pinged first.

The protocol is the official SDK's (`mcp.Client` over its stdio, streamable HTTP and SSE
transports) in its dual-era mode: each server is spoken to in the newest revision it supports,
2026-07-28 (stateless: `server/discover`, no session to lose) or else the handshake
(2025-11-25 and older). List results are cached by the server's hints (ttlMs, cacheScope).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from core import redact
from toolsets.base import ToolContext, ToolFailure

from . import app_resources, elicitation, results, untrusted
from .catalog import ServerSpec
from .changes import list_all_tools
from .connection import CONNECT_TIMEOUT_S, Access, Connection
from .errors import auth_failure, describe, leaves
from .models import MCPServer

__all__ = [
    "Access",
    "access_for",
    "call_tool",
    "close_all",
    "connect",
    "describe",
    "discover",
    "leaves",
    "on_lasting_loop",
    "pool",
    "read_resource",
]

log = logging.getLogger(__name__)

IDLE_CLOSE_S = 600.0
MAX_CONNECTIONS = 64


def access_for(spec: ServerSpec, user_id: int | None, token: str) -> Access:
    headers = dict(spec.headers)
    redact.register(*headers.values())
    if spec.credential == MCPServer.Credential.USER_TOKEN:
        if not token:
            raise ToolFailure(f"{spec.name}: API key not configured.", error_type="permission_denied")
        value = spec.credential_format.replace("{token}", token)
        redact.register(token, value)
        headers[spec.credential_header] = value
        return Access(f"token:{hashlib.sha256(token.encode()).hexdigest()}", tuple(headers.items()), user_id)
    if spec.credential == MCPServer.Credential.OAUTH:
        if user_id is None:
            raise ToolFailure(f"{spec.name} needs a user's OAuth connection.", error_type="permission_denied")
        return Access(f"user:{user_id}", tuple(headers.items()), user_id)
    return Access("shared", tuple(headers.items()))


async def call_tool(spec: ServerSpec, name: str, arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Calls one tool; returns the stored form of its result (see `results`). An `isError`
    result raises ToolFailure(execution_error) with the server's text, which the model sees."""
    access = access_for(spec, ctx.user_id, ctx.api_key)
    connection = pool().connection(spec, access)
    progress = _progress_reporter(ctx)
    # The server's questions during this call (elicitation, both eras) go to this call's person.
    questions = elicitation.Handler(spec.name, name, ctx.elicit, ctx.clock, elicitation_timeout_s())
    with elicitation.calling(connection, questions):
        try:
            raw = await connection.call(name, arguments, progress, spec.timeout_s, waits=questions.wait_budget)
        except elicitation.PagesRequired as needed:
            # The server refused the call until the user visits its pages (URL_ELICITATION_REQUIRED):
            # it did not run, so once they are done it is called again, once.
            await questions.visit_first(needed)
            try:
                raw = await connection.call(name, arguments, progress, spec.timeout_s, waits=questions.wait_budget)
            except elicitation.PagesRequired as again:
                raise ToolFailure(f"{spec.name} still needs pages visited: {again}") from None
    if questions.timed_out:
        raise ToolFailure(questions.timeout_message(), error_type="timeout_error", fault=False)
    shaped = results.shape(raw, server=spec.toolset_id)
    if raw.get("isError"):
        raise ToolFailure(results.model_text(shaped)[:4000] or f"{spec.name} reported an error without details.")
    return shaped


async def read_resource(spec: ServerSpec, uri: str, user_id: int, token: str) -> list[dict[str, Any]]:
    """A resource's contents as `user_id` may read them (with their credential), each shaped
    like a tool's content block (`results.shape`), read on the pooled connection for that access
    on the process's lasting loop (`on_lasting_loop`)."""
    access = access_for(spec, user_id, token)

    async def pooled() -> dict[str, Any]:
        return await pool().connection(spec, access).read_resource(uri, spec.timeout_s)

    raw = await on_lasting_loop(pooled)
    found = raw.get("contents")
    contents: list[Any] = found if isinstance(found, list) else []
    shaped = results.shape({"content": [{"type": "resource", "resource": c} for c in contents]}, server=spec.toolset_id)
    blocks: list[dict[str, Any]] = shaped["content"]
    return blocks


async def connect(spec: ServerSpec, ctx: ToolContext) -> None:
    """Makes sure the server is connected before a call starts, within the connection's own
    budget: starting a stdio server or opening a session must not eat the tool's timeout."""
    connection = pool().connection(spec, access_for(spec, ctx.user_id, ctx.api_key))
    if not connection.connected:
        ctx.progress(f"Connecting to {spec.name}", None)
    await connection.ready(CONNECT_TIMEOUT_S)


def elicitation_timeout_s() -> float:
    from django.conf import settings

    return float(settings.TESSERA["MCP_ELICITATION_TIMEOUT_S"])


def _progress_reporter(ctx: ToolContext) -> Callable[[float, float | None, str | None], Any]:
    async def report(progress: float, total: float | None, message: str | None) -> None:
        percent = progress / total * 100 if total else None
        text = untrusted.clean_text(message, 200) if message else ""
        if not text and total:
            text = f"{progress:g} of {total:g}"
        ctx.progress(text, percent)

    return report


# --- The pool ----------------------------------------------------------------------------------

_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool] = weakref.WeakKeyDictionary()


def pool() -> Pool:
    loop = asyncio.get_running_loop()
    found = _pools.get(loop)
    if found is None:
        # The lasting loop's pool serves requests only (see below).
        found = _pools[loop] = Pool(requests_only=loop is _lasting)
    return found


async def close_all() -> None:
    """Closes every connection of the running loop (stdio servers are stopped)."""
    found = _pools.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()


class Pool:
    def __init__(self, *, requests_only: bool = False) -> None:
        # A pool for requests only (a web process's) closes idle stdio servers too, and leaves
        # the servers' announcements to the workers' connections.
        self.requests_only = requests_only
        self.connections: dict[tuple[int, str], Connection] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def connection(self, spec: ServerSpec, access: Access) -> Connection:
        key = (spec.id, access.key)
        found = self.connections.get(key)
        if found is not None and found.spec.version == spec.version and not found.closed:
            return found
        if found is not None:
            self._retire(key)  # the admin changed the server: connect again with the new settings
        self._tidy()
        made = self.connections[key] = Connection(spec, access, watches=not self.requests_only)
        return made

    def _tidy(self) -> None:
        """Closes idle connections past IDLE_CLOSE_S, and the oldest idle ones over
        MAX_CONNECTIONS. A worker keeps its stdio servers (one child process per server, started
        again only when it dies); the lasting loop of a web process closes them too."""
        loop = asyncio.get_running_loop()
        idle = sorted(
            (c.last_used, key)
            for key, c in self.connections.items()
            if c.active == 0 and (self.requests_only or c.spec.transport != "stdio")
        )
        for last_used, key in idle:
            if loop.time() - last_used > IDLE_CLOSE_S or len(self.connections) >= MAX_CONNECTIONS:
                self._retire(key)

    def _retire(self, key: tuple[int, str]) -> None:
        connection = self.connections.pop(key, None)
        if connection is not None:
            task = asyncio.get_running_loop().create_task(connection.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        connections, self.connections = list(self.connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), *self._closing, return_exceptions=True)


# --- The lasting loop of processes that have none ------------------------------------------------
#
# The web processes (the composer's prompt and resource pickers, argument completion, reading a
# resource, a knowledge base's "List its resources") and the files worker's threads run each
# request on a short-lived loop. A connection of its own per request meant, for a stdio server, a
# new child process per keystroke of argument completion (about 0.8 s of CPU to start the SDK's
# server before it answers) and, for a remote one, a new session each time. Their requests run on
# one lasting loop per process instead, where connections are pooled as a worker's are; idle
# ones, stdio servers included, are closed after IDLE_CLOSE_S. They act on no announcement of the
# server (tools or resources changed): the workers' connections do, once, as before.

# How often the lasting loop closes the connections idle too long.
TIDY_EVERY_S = 60.0

_lasting: asyncio.AbstractEventLoop | None = None
_lasting_lock = threading.Lock()


def lasting_loop() -> asyncio.AbstractEventLoop:
    """The process's lasting loop, started on first use in a daemon thread."""
    global _lasting
    with _lasting_lock:
        if _lasting is None or _lasting.is_closed():
            made = asyncio.new_event_loop()
            threading.Thread(target=made.run_forever, name="mcp-connections", daemon=True).start()
            made.call_soon_threadsafe(made.call_later, TIDY_EVERY_S, _tidy_lasting, made)
            atexit.register(close_lasting)
            _lasting = made
        return _lasting


async def on_lasting_loop[T](make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`make()` run on the lasting loop, where its connections are pooled and outlive the
    request. Cancelling the caller (a request the browser abandoned) cancels it there too."""
    target = lasting_loop()
    if asyncio.get_running_loop() is target:
        return await make()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(make(), target))


def close_lasting(timeout: float = 10.0) -> None:
    """Closes the lasting loop's connections (stdio servers are stopped); the loop stays for
    the next request. At exit, and after each test that used it."""
    with _lasting_lock:
        found = _lasting
    if found is None or found.is_closed() or not found.is_running():
        return
    try:
        asyncio.run_coroutine_threadsafe(close_all(), found).result(timeout)
    except Exception:  # a server that will not stop: the process ends anyway
        log.warning("Closing the pooled MCP connections took longer than %s s", timeout)


def _tidy_lasting(target: asyncio.AbstractEventLoop) -> None:
    try:
        close_idle(target)
    finally:
        target.call_later(TIDY_EVERY_S, _tidy_lasting, target)


def close_idle(target: asyncio.AbstractEventLoop) -> None:
    """Closes the connections of `target`'s pool (run on it) idle too long."""
    found = _pools.get(target)
    if found is not None:
        found._tidy()


# --- Discovery (the admin's "Test connection / refresh tools") ---------------------------------


@dataclass
class Discovery:
    server_name: str
    server_version: str
    tools: list[dict[str, Any]]
    # The revision the server is spoken to in: 2026-07-28 (stateless) or a handshake-era one.
    protocol_version: str = ""
    instructions: str = ""
    # The MCP Apps pages the tools name, as read (None: the server's apps are off).
    pages: dict[str, app_resources.Page | str] | None = None


async def discover(spec: ServerSpec, access: Access, timeout: float = CONNECT_TIMEOUT_S) -> Discovery:  # noqa: ASYNC109
    """Connects once, lists the tools and disconnects (a connection of its own, not pooled).
    Raises ConnectionError with a readable message."""
    connection = Connection(spec, access)
    try:
        # The pages have a budget of their own, after the listing's.
        async with asyncio.timeout(timeout + (app_resources.PAGES_BUDGET_S if spec.apps else 0)):
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(connection._client(stack))
                info = client.server_info
                version = client.protocol_version
                instructions = client.instructions or ""
                listed = await list_all_tools(client)
                pages = await app_resources.read_all(client, listed) if spec.apps else None
    except TimeoutError:
        raise ConnectionError(f"The server did not answer within {timeout:g} s.") from None
    except Exception as exc:
        if connection._last_status in (401, 403) or auth_failure(exc):
            raise ConnectionError(
                f"The server refused the credential (HTTP {connection._last_status or 401})."
            ) from None
        raise ConnectionError(describe(exc)) from None
    return Discovery(
        server_name=info.name if info else "",
        server_version=info.version if info else "",
        tools=listed,
        protocol_version=version,
        instructions=instructions,
        pages=pages,
    )
