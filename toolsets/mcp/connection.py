"""One connection to one MCP server for one kind of caller (see `client` for the rules it
keeps): started on demand, supervised (restart with backoff), watched while idle, and told
about the server's tool-list changes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from channels.db import database_sync_to_async
from mcp.client import Client
from mcp.client.caching import CacheConfig
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, URL_ELICITATION_REQUIRED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolsets.base import ToolFailure

from . import app_resources, catalog, changes, elicitation, signals, transport, untrusted
from .catalog import ServerSpec
from .errors import AuthRequired, auth_failure, describe
from .models import MCPServer
from .watched import Watched

if TYPE_CHECKING:
    # For the annotation only: transport imports the OAuth providers where they are used.
    from .oauth_providers import RuntimeProvider

log = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="Tessera", version="1.0")
CONNECT_TIMEOUT_S = 20.0
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
STABLE_AFTER_S = 60.0
# A pooled handshake-era session idle this long is pinged before a call relies on it.
CHECK_IDLE_AFTER_S = 30.0
PING_TIMEOUT_S = 5.0

T = TypeVar("T")


@dataclass(frozen=True)
class Access:
    """How one caller reaches a server: which connection to share and what to send."""

    key: str
    headers: tuple[tuple[str, str], ...] = ()
    user_id: int | None = None


class Connection:
    def __init__(self, spec: ServerSpec, access: Access, *, watches: bool = True) -> None:
        self.spec = spec
        self.access = access
        # Whether the server's announcements (tools or resources changed) are acted on here: by
        # a worker's connections, not by the ones a web process keeps for its pickers' requests,
        # which would only repeat the workers' refreshes (see client.on_lasting_loop).
        self.watches = watches
        self.client: Client | None = None
        self.closed = False
        self.active = 0
        loop = asyncio.get_running_loop()
        self.last_used = loop.time()
        self._attempt: asyncio.Future[Client] | None = None
        self._task: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()
        self._failures = 0
        self._next_start = 0.0
        self._last_error = ""
        self._last_status = 0
        self._refresh: asyncio.Task[None] | None = None
        self._refresh_again = False
        self._renew_now = False
        self._provider: RuntimeProvider | None = None
        # The client whose session the server refused (see `transport.session_refused`), if any.
        self._refused: Client | None = None

    # The caller's side.

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: Any,
        timeout: float,  # noqa: ASYNC109 - a per-request read timeout the SDK applies
        waits: float = 0.0,
    ) -> dict[str, Any]:
        # The read timeout is a backstop behind the executor's own (which cancels the call and
        # so sends the cancellation): a server must not keep a request for ever. `waits`: how
        # long the user may take over the call's questions (a handshake-era server holds the
        # call open while it asks; the executor's clock pauses meanwhile).
        return await self._request(
            lambda client: client.call_tool(
                name, arguments, read_timeout_seconds=timeout + 5 + waits, progress_callback=progress
            ),
            timeout,
        )

    async def read_resource(self, uri: str, timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        """`resources/read` (a resource link opened from a card)."""
        return await self._request(lambda client: client.read_resource(uri), timeout)

    async def list_tools(self, timeout: float) -> list[dict[str, Any]]:  # noqa: ASYNC109
        """Every page of the server's tools as the caller may see them (with a user's grant), with a
        call's handling: a healed session, and a refused grant said as "connect again" (the OAuth
        provider stops the request; the transport alone reports only a closed connection)."""
        return await self._send(changes.list_all_tools, timeout)

    async def _request(self, send: Callable[[Client], Awaitable[Any]], timeout: float) -> dict[str, Any]:  # noqa: ASYNC109
        """`_send` for a request whose result is the SDK's model: dumped as on the wire."""
        result = await self._send(send, timeout)
        data: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return data

    async def _send(self, send: Callable[[Client], Awaitable[T]], timeout: float) -> T:  # noqa: ASYNC109
        await self.check()
        for attempt in (1, 2):
            client = await self.ready(min(timeout, CONNECT_TIMEOUT_S))
            self.active += 1
            self.last_used = asyncio.get_running_loop().time()
            try:
                result = await send(client)
            except MCPError as exc:
                if attempt == 1 and self._refused is client:
                    # The server refused the request for its session id, so it did not run it: a
                    # new session (a restarted server, an idle reap) and the same request once more.
                    log.info("MCP server %s refused the session; starting a new one", self.spec.name)
                    self._renew(client)
                    continue
                if exc.code == URL_ELICITATION_REQUIRED:
                    raise elicitation.PagesRequired(exc) from None  # the caller asks, and calls again
                raise self._failure(exc) from None
            except RuntimeError as exc:
                # The SDK checks a result against the tool's declared outputSchema and raises
                # this; anything else it raises this way is the connection's own failure.
                text = str(exc)
                if "output schema" in text or "structured content" in text:
                    raise ToolFailure(
                        f"{self.spec.name}: the tool's result does not match the output schema it declared "
                        f"({untrusted.clean_text(text, 300)})."
                    ) from None
                raise
            except (httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                self._ended.set()
                raise ToolFailure(
                    f"{self.spec.name}: the connection failed ({describe(exc)}).", retryable=True
                ) from None
            finally:
                self.active -= 1
            return result
        raise AssertionError("unreachable")  # pragma: no cover - the second attempt returns or raises

    def _renew(self, client: Client | None) -> None:
        """Ends `client`'s session and lets the next `ready()` open a new one at once: a lost
        session is not the server failing, so no backoff. A session already replaced (another
        call renewed it first) is left alone."""
        if client is None or client is not self.client or self._ended.is_set():
            return
        self._renew_now = True
        self._ended.set()

    @property
    def protocol_version(self) -> str:
        client = self.client
        return client.protocol_version if client is not None else ""

    async def check(self) -> None:
        """Makes sure a pooled handshake-era HTTP session is still alive before a call uses it,
        when it sat idle long enough for the server to have been restarted or to have reaped it.
        A 2026 server has no session (each request stands alone) and stdio's end is watched."""
        client = self.client
        if client is not None and self._refused is client:
            self._renew(client)  # e.g. its change stream was refused: no call need fail first
            return
        if (
            client is None
            or self._ended.is_set()
            or self.spec.transport == MCPServer.Transport.STDIO
            or client.protocol_version in MODERN_PROTOCOL_VERSIONS
            or asyncio.get_running_loop().time() - self.last_used < CHECK_IDLE_AFTER_S
        ):
            return
        try:
            with anyio.fail_after(PING_TIMEOUT_S):
                await client.session.send_ping()
        except Exception as exc:  # any failure: the session is not worth keeping
            log.info("MCP server %s: pooled session failed its check (%s)", self.spec.name, describe(exc))
            self._renew(client)
        else:
            self.last_used = asyncio.get_running_loop().time()

    def _failure(self, exc: MCPError) -> ToolFailure:
        refused = self._provider.take_failure() if self._provider is not None else ""
        if refused:
            # The OAuth provider stopped the request and said why (a step-up to connect for, a
            # grant that ended): the transport only reports a closed connection.
            return ToolFailure(f"{self.spec.name}: {refused}", error_type="permission_denied")
        if self._last_status in (401, 403):
            return ToolFailure(
                f"{self.spec.name} refused your credential (HTTP {self._last_status}).", error_type="permission_denied"
            )
        if exc.code == CONNECTION_CLOSED:
            self._ended.set()
            return ToolFailure(
                f"{self.spec.name} closed the connection during the call (the server stopped or crashed).",
                retryable=True,
            )
        if exc.code == REQUEST_TIMEOUT:
            return ToolFailure(f"{self.spec.name} did not answer in time.", error_type="timeout_error", retryable=True)
        return ToolFailure(f"{self.spec.name} answered with an error: {untrusted.clean_text(exc.message, 500)}")

    @property
    def connected(self) -> bool:
        return self.client is not None and not self._ended.is_set()

    async def ready(self, budget: float) -> Client:
        """The connected client, connecting (or waiting for a restart) within `budget` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        if self.closed:
            raise ToolFailure(f"{self.spec.name}: the connection was closed.", retryable=True)
        if self.client is not None and not self._ended.is_set():
            return self.client
        if self._attempt is None or self._attempt.done():
            # The last attempt is over (failed, or its connection ended): wait for the next one.
            self._attempt = _quiet_future(loop)
        if self._task is None or self._task.done():
            self._start()
        wait = self._next_start - loop.time()
        if wait > budget:
            raise ToolFailure(
                f"{self.spec.name} is unreachable ({self._last_error}); the next attempt is in {wait:.0f} s.",
                retryable=True,
            )
        assert self._attempt is not None
        attempt = self._attempt
        try:
            client = await asyncio.wait_for(asyncio.shield(attempt), max(0.1, deadline - loop.time()))
        except TimeoutError:
            raise ToolFailure(
                f"{self.spec.name} did not answer the connection within {budget:g} s.", retryable=True
            ) from None
        except AuthRequired as exc:
            raise ToolFailure(str(exc), error_type="permission_denied") from None
        except Exception as exc:
            raise ToolFailure(f"{self.spec.name} is unreachable: {describe(exc)}", retryable=True) from None
        if self._ended.is_set():
            raise ToolFailure(f"{self.spec.name}: the connection ended.", retryable=True)
        return client

    async def close(self) -> None:
        self.closed = True
        self._ended.set()
        for task in (self._task, self._refresh):
            if task is not None and not task.done():
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, 15)

    # The connection's own task.

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._attempt is None or self._attempt.done():
            self._attempt = _quiet_future(loop)
        self._task = loop.create_task(self._supervise(), name=f"mcp:{self.spec.toolset_id}:{self.access.key[:12]}")

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.closed:
            delay = self._next_start - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.closed:
                break
            if self._attempt is None or self._attempt.done():
                self._attempt = _quiet_future(loop)
            attempt = self._attempt
            self._ended = asyncio.Event()
            up_at: float | None = None
            error = ""
            auth_failed = False
            try:
                async with AsyncExitStack() as stack:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        client = await stack.enter_async_context(self._client(stack))
                    if self.watches and changes.listens(client):
                        # Listening before the first call: a change that call causes is seen.
                        listening = asyncio.Event()
                        listener = loop.create_task(
                            changes.listen(client, self._ended, listening, self._tools_changed, self.spec.name)
                        )
                        stack.callback(listener.cancel)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(listening.wait(), PING_TIMEOUT_S)
                    self.client, up_at = client, loop.time()
                    attempt.set_result(client)
                    await self._health(None)
                    await self._ended.wait()
            except asyncio.CancelledError:
                if not self.closed:
                    raise
            except BaseException as exc:  # every failure ends this attempt; the loop decides
                auth_failed = auth_failure(exc) or self._last_status in (401, 403)
                error = (
                    f"the server did not answer within {CONNECT_TIMEOUT_S:g} s"
                    if isinstance(exc, TimeoutError)
                    else describe(exc)
                )
                if not attempt.done():
                    attempt.set_exception(
                        AuthRequired(f"{self.spec.name} refused your credential: {error}")
                        if auth_failed
                        else ConnectionError(error)
                    )
            finally:
                self.client = None
            if self.closed:
                break
            stable = up_at is not None and loop.time() - up_at > STABLE_AFTER_S
            if self._renew_now and up_at is not None:
                self._renew_now = False
                self._next_start = loop.time()
            else:
                self._failures = 1 if stable else self._failures + 1
                self._next_start = loop.time() + min(BACKOFF_MAX_S, BACKOFF_START_S * 2 ** (self._failures - 1))
            self._last_error = error or "the connection ended"
            if up_at is None and not auth_failed:
                # Only a failed connection attempt makes a server unreachable: one that ended
                # after working is started again (stdio) or reconnected (remote), and a
                # user's refused credential says nothing about the server.
                await self._health(self._last_error)
            waited_for = self._attempt is not None and not self._attempt.done()
            if self.spec.transport != MCPServer.Transport.STDIO and not waited_for:
                return  # a remote server is reconnected by the next call that needs it
            log.warning(
                "MCP server %s stopped (%s); restarting in %.0f s",
                self.spec.name,
                self._last_error,
                self._next_start - loop.time(),
            )

    @contextlib.asynccontextmanager
    async def _client(self, stack: AsyncExitStack) -> AsyncIterator[Client]:
        async with Client(
            Watched(self._transport(stack), self._ended),
            # The newest revision the server speaks: `server/discover` (2026-07-28, stateless),
            # else the handshake (2025-11-25 and older).
            mode="auto",
            # The SDK's cache honours the server's ttlMs/cacheScope hints on list results and
            # drops entries on change notifications.
            cache=CacheConfig(),
            message_handler=self._on_message,
            client_info=CLIENT_INFO,
            # Declares elicitation (form and url) and answers the server's questions through
            # the card of the call that caused them (both eras: see `elicitation`).
            elicitation_callback=elicitation.answerer(self),
            # MCP Apps, unless the admin turned them off for this server.
            extensions=[app_resources.Extension()] if self.spec.apps else None,
        ) as client:
            yield client

    def _transport(self, stack: AsyncExitStack) -> Any:
        spec, user_id = self.spec, self.access.user_id
        oauth = spec.transport != MCPServer.Transport.STDIO and spec.credential == MCPServer.Credential.OAUTH
        if oauth and user_id is not None:
            self._provider = transport.oauth_provider(spec, user_id)
        return transport.open_transport(spec, self.access.headers, self._provider, stack, self._note_status)

    async def _note_status(self, response: httpx2.Response) -> None:
        if transport.session_refused(response.request, response) and self.client is not None:
            # Only the current session's transport sends its id: this client's session is
            # gone, whatever error text the transport makes of the answer.
            self._refused = self.client
        if response.status_code in (401, 403):
            self._last_status = response.status_code
        elif response.status_code < 300:
            self._last_status = 0

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            if self.watches:
                self._tools_changed()
        elif isinstance(message, types.ElicitCompleteNotification):
            await elicitation.completed(self, message.params.elicitation_id)
        elif isinstance(message, types.ResourceUpdatedNotification | types.ResourceListChangedNotification):
            if not self.watches:
                return
            uri = message.params.uri if isinstance(message, types.ResourceUpdatedNotification) else None
            await self._resources_changed(uri)
        elif isinstance(message, Exception):
            log.info("MCP server %s: %s", self.spec.name, describe(message))

    def _tools_changed(self) -> None:
        if self._refresh is not None and not self._refresh.done():
            self._refresh_again = True
        else:
            self._refresh = asyncio.get_running_loop().create_task(self._refresh_tools())

    async def _refresh_tools(self) -> None:
        while True:
            self._refresh_again = False
            client = self.client
            if client is None:
                return
            try:
                listed = await changes.list_all_tools(client, fresh=True)
                pages = await app_resources.read_all(client, listed) if self.spec.apps else None
                await database_sync_to_async(catalog.store_tools, thread_sensitive=False)(
                    self.spec.id, listed, pages=pages
                )
            except Exception:
                log.warning("Refreshing the tools of %s failed", self.spec.name, exc_info=True)
            if not self._refresh_again:
                return

    async def _resources_changed(self, uri: str | None) -> None:
        # Documents made from this server's resources are read again (knowledge.refresh).
        try:
            await database_sync_to_async(signals.resources_changed.send, thread_sensitive=False)(
                sender=MCPServer, server_id=self.spec.id, uri=uri
            )
        except Exception:  # a receiver's failure must not end the session's message loop
            log.warning("Handling a resource change of %s failed", self.spec.name, exc_info=True)

    async def _health(self, error: str | None) -> None:
        if catalog.record_health(self.spec.id, error):
            try:
                await database_sync_to_async(catalog.write_health, thread_sensitive=False)(self.spec.id)
            except Exception:  # the in-process state is already right; the row is best effort
                log.warning("Storing the health of %s failed", self.spec.name, exc_info=True)


def _quiet_future(loop: asyncio.AbstractEventLoop) -> asyncio.Future[Client]:
    # Nobody may be waiting when an attempt fails: retrieve the exception so asyncio does not
    # log it as lost.
    future: asyncio.Future[Client] = loop.create_future()
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return future
