"""A pipelined Redis connection for the commands an event loop sends many times a second.

A streaming turn stores its state and publishes a fragment about twenty times a second, and a
worker runs dozens of turns. Through redis-py's asyncio client each such command costs ~180 µs
of CPU here (connection pool, retry and timeout wrappers, event hooks, argument encoding); the
same command written on a plain asyncio connection and read with hiredis costs ~60 µs
(bench/RESULTS.md). `RedisPipe` is that connection: one per event loop, commands written as
they come without waiting for earlier replies, replies matched to callers in order.

It speaks only what its callers need: `redis://` and `unix://` URLs (username, password and
database as redis-py reads them from the URL). Anything else (`rediss://`, URL options such as
timeouts) makes `for_loop()` answer None and callers keep redis-py.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

import hiredis
from redis.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

log = logging.getLogger(__name__)

# A reply that has not come after this long means the connection is stuck: it is dropped, its
# callers get ConnectionError, the next command opens a new one.
REPLY_TIMEOUT_S = 10.0
# After a failed connect, callers use redis-py for this long before the pipe tries again.
RETRY_CONNECT_S = 2.0
_KNOWN_OPTIONS = {"host", "port", "db", "username", "password", "path", "connection_class"}


def pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP: an array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        parts.append(b"$%d\r\n" % len(arg))
        parts.append(arg)
        parts.append(b"\r\n")
    return b"".join(parts)


class _Protocol(asyncio.Protocol):
    def __init__(self, pipe: RedisPipe) -> None:
        self.pipe = pipe
        self.reader = hiredis.Reader()
        # The callers waiting for this connection's replies, in the order their commands went out.
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.writable: asyncio.Future[None] | None = None  # set while the transport is paused

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        waiting = self.waiting
        while (reply := self.reader.gets()) is not False:
            if not waiting:  # a reply nobody asked for: the stream is out of step
                self.pipe.drop(self, "Redis sent a reply nobody asked for")
                return
            future, _ = waiting.popleft()
            if not future.done():
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.pipe.drop(self, f"Redis connection lost: {exc or 'closed'}")

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None


class RedisPipe:
    def __init__(self, url: str) -> None:
        self.url = url
        self.options = parse_url(url)
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None
        self._check: asyncio.TimerHandle | None = None
        self.down_until = 0.0  # time.monotonic() before which connecting is not tried again

    async def execute(self, *args: Any) -> Any:
        """Sends one command and returns its reply; an error reply raises ResponseError
        (NoScriptError for NOSCRIPT), a broken connection redis's ConnectionError."""
        protocol = await self._writable()
        return result(await self._send(protocol, pack(args)))

    async def execute_many(self, *commands: tuple[Any, ...]) -> list[Any]:
        """Sends the commands back to back and returns their replies, in order; raises the first
        error (after every reply is in, so none is left unread)."""
        protocol = await self._writable()
        # One write for all: a write is a system call, and on a busy machine each wakes Redis.
        replies = self._send_many(protocol, [pack(command) for command in commands])
        values, error = [], None
        for reply in replies:
            try:
                values.append(result(await reply))
            except (ResponseError, RedisConnectionError) as exc:
                error = error or exc
        if error is not None:
            raise error
        return values

    async def _writable(self) -> _Protocol:
        protocol = self._protocol or await self._connect()
        if protocol.writable is not None:  # Redis is not keeping up: wait for its buffer to drain
            await protocol.writable
        return protocol

    def ready(self) -> bool:
        """Whether a command written now goes straight out: connected, and Redis keeping up."""
        protocol = self._protocol
        return (
            protocol is not None
            and protocol.writable is None
            and protocol.transport is not None
            and not protocol.transport.is_closing()
        )

    def send_nowait(self, *args: Any) -> asyncio.Future[Any]:
        """Writes one command at once, for a caller that checked `ready()` and does not wait for
        the reply. The returned future holds the reply as read: `result()` turns an error reply
        into its exception (a broken connection fails the future itself)."""
        assert self._protocol is not None
        return self._send(self._protocol, pack(args))

    def _send(self, protocol: _Protocol, data: bytes) -> asyncio.Future[Any]:
        return self._send_many(protocol, [data])[0]

    def _send_many(self, protocol: _Protocol, commands: list[bytes]) -> list[asyncio.Future[Any]]:
        """Writes packed commands in one write; a future for each one's reply, in order."""
        if protocol.transport is None or protocol.transport.is_closing():
            raise RedisConnectionError("Redis connection closed")
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        futures = [loop.create_future() for _ in commands]
        protocol.waiting.extend((future, now) for future in futures)
        protocol.transport.write(b"".join(commands))
        if self._check is None:
            self._check = loop.call_later(REPLY_TIMEOUT_S / 2, self._check_replies)
        return futures

    async def _connect(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._protocol is not None:
                return self._protocol
            protocol = None
            try:
                async with asyncio.timeout(REPLY_TIMEOUT_S):
                    protocol = await open_connection(self.options, lambda: _Protocol(self))
                    # Every reply of the set-up is awaited before the connection is handed out.
                    for command in setup_commands(self.options):
                        result(await self._send(protocol, command))
            except BaseException as exc:
                if protocol is not None:
                    self.drop(protocol, "set-up failed")
                if isinstance(exc, OSError | TimeoutError):
                    self.down_until = time.monotonic() + RETRY_CONNECT_S
                    raise RedisConnectionError(f"Cannot connect to Redis: {exc}") from exc
                raise
            self._protocol = protocol
            return protocol

    def drop(self, protocol: _Protocol, reason: str) -> None:
        """The connection is unusable: every caller still waiting on it gets ConnectionError."""
        if protocol.transport is not None:
            protocol.transport.abort()
        if self._protocol is protocol:
            self._protocol = None
        waiting, protocol.waiting = protocol.waiting, collections.deque()
        for future, _ in waiting:
            if not future.done():
                future.set_exception(RedisConnectionError(reason))
        if protocol.writable is not None and not protocol.writable.done():
            protocol.writable.set_exception(RedisConnectionError(reason))

    def _check_replies(self) -> None:
        """Runs every few seconds while replies are awaited (one timer per connection, not one
        per command): a reply older than REPLY_TIMEOUT_S means Redis or the network is stuck."""
        self._check = None
        protocol = self._protocol
        if protocol is None or not protocol.waiting:
            return
        if time.monotonic() - protocol.waiting[0][1] > REPLY_TIMEOUT_S:
            log.warning("Redis did not reply within %g s; reconnecting", REPLY_TIMEOUT_S)
            self.drop(protocol, f"Redis did not reply within {REPLY_TIMEOUT_S:g} s")
            return
        self._check = asyncio.get_running_loop().call_later(REPLY_TIMEOUT_S / 2, self._check_replies)

    def close(self) -> None:
        if self._protocol is not None:
            self.drop(self._protocol, "closed")


async def open_connection[P: asyncio.Protocol](options: dict[str, Any], factory: Callable[[], P]) -> P:
    """A connection to the Redis that `options` (redis-py's `parse_url`) name, as `factory`'s
    protocol; the caller sends `setup_commands` on it."""
    loop = asyncio.get_running_loop()
    if options.get("path"):
        _, protocol = await loop.create_unix_connection(factory, options["path"])
    else:
        _, protocol = await loop.create_connection(factory, options.get("host", "localhost"), options.get("port", 6379))
    return protocol


def setup_commands(options: dict[str, Any]) -> list[bytes]:
    """What a new connection sends first: AUTH and SELECT, as the URL asks."""
    setup = []
    if options.get("password"):
        auth = [options.get("username"), options["password"]]
        setup.append(pack(("AUTH", *[part for part in auth if part])))
    if options.get("db"):
        setup.append(pack(("SELECT", options["db"])))
    return setup


def supports(url: str) -> bool:
    """Whether a pipe (or another of Tessera's own connections) can speak to `url`."""
    return url.startswith(("redis://", "unix://")) and not set(parse_url(url)) - _KNOWN_OPTIONS


def result(reply: Any) -> Any:
    """A reply as redis-py returns it: an error reply raised as ResponseError (NoScriptError)."""
    if isinstance(reply, hiredis.ReplyError):
        message = str(reply)
        raise NoScriptError(message) if message.startswith("NOSCRIPT") else ResponseError(message)
    return reply


_pipes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RedisPipe] = weakref.WeakKeyDictionary()
_unsupported: set[str] = set()


def for_loop(url: str) -> RedisPipe | None:
    """The running loop's pipe to `url`, or None when the URL needs what the pipe does not do."""
    if url in _unsupported:
        return None
    loop = asyncio.get_running_loop()
    found = _pipes.get(loop)
    if found is None or found.url != url:
        if not supports(url):
            _unsupported.add(url)
            return None
        found = _pipes[loop] = RedisPipe(url)
    if found._protocol is None and time.monotonic() < found.down_until:
        return None
    return found


def close(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Closes a loop's pipe (a worker's shutdown)."""
    found = _pipes.pop(loop or asyncio.get_running_loop(), None)
    if found is not None:
        found.close()


__all__ = ["RedisPipe", "close", "for_loop", "open_connection", "result", "setup_commands", "supports"]
