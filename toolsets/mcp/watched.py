"""A transport that tells when it ended: how a connection learns, while idle, that its server
went away (a stdio child that exited, a stream the server closed). What it reads is also where a
result's omitted `resultType` is read as the protocol says (`complete_by_default`)."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse


def complete_by_default(item: Any) -> Any:
    """A result without `resultType` is a complete one: the 2026-07-28 revision tells clients to
    assume "complete" when a server leaves it out. The SDK checks each result against that
    revision's schema, which lists the field as required, and would fail the call (or the
    `server/discover` that starts the connection) over a field whose absence has a defined
    meaning. Earlier revisions have no such field: on their sessions the SDK drops or ignores it
    (and "complete" is what their results are)."""
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse):
        result = item.message.result
        if isinstance(result, dict) and "resultType" not in result:
            result["resultType"] = "complete"
    return item


class Watched:
    """A transport whose read stream's end sets `ended`: how a connection learns, while idle,
    that its server went away (a stdio child that exited, a stream the server closed)."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self.inner = inner
        self.ended = ended

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self.inner.__aenter__()
        return WatchedRead(read, self.ended), write

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.ended.set()
        result: bool | None = await self.inner.__aexit__(exc_type, exc, tb)
        return result


class WatchedRead:
    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self.inner = inner
        self.ended = ended

    async def receive(self) -> Any:
        try:
            return complete_by_default(await self.inner.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self.ended.set()
            raise

    def __aiter__(self) -> WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return complete_by_default(await self.inner.__anext__())
        except StopAsyncIteration:
            self.ended.set()
            raise

    async def aclose(self) -> None:
        self.ended.set()
        await self.inner.aclose()

    async def __aenter__(self) -> WatchedRead:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.ended.set()
        result: bool | None = await self.inner.__aexit__(exc_type, exc, tb)
        return result
