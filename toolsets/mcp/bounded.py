"""An HTTP MCP server's answers, read no further than a bound (toolsets.mcp.transport puts this
hook on every HTTP client it makes: streamable HTTP and the older SSE, with or without OAuth).

The SDK reads a JSON answer whole (`response.aread()`) before anything looks at its size, so a
server answering `resources/read` with 50 MB (a page, a tool result) would be read whole into a
worker. Here the body is counted as it streams in: a `Content-Length` past the bound is refused
before a byte is read; without one (chunked, or until the connection closes) or with one that
lies, the reading stops at the bound and the connection is closed. The request gets a JSON-RPC
error in place of the answer, as a stdio server's oversized message does (stdio_guard.py, same
`REFUSED` data, so toolsets.mcp.app_resources tells both the same way). A body within the bound
is passed on whole (the SDK reads it whole anyway). Tessera asks for answers uncompressed
(`HEADERS`); a server (or a proxy in front of it) that compresses all the same is still heard:
gzip and deflate are unpacked here, a bounded piece at a time, and the bound counts the unpacked
bytes, so a few KB that would unpack to gigabytes stop at the bound like any other answer. An
encoding Tessera cannot unpack that way is refused unread.

Server-sent events are bounded per event by the SDK's own reader (`max_sse_event_size`, which
the transport sets to the same bound): a stream carries many messages and may outlive any bound.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2

from .stdio_guard import refusal

log = logging.getLogger(__name__)

EVENT_STREAM = "text/event-stream"
# Sent with every request: the bound counts the bytes the SDK will hold.
HEADERS = {"Accept-Encoding": "identity"}
ENCODED = "tessera:message-encoded"
UNPACKED = ("gzip", "x-gzip", "deflate")
# The most one step of unpacking produces: a bomb's output is handed on (and counted) in pieces.
PIECE = 64 * 1024


def encoded_refusal(message_id: bytes) -> bytes:
    error = {
        "code": -32603,
        "message": (
            "Tessera refused the server's answer: it came compressed in a way Tessera does not unpack "
            "(gzip, deflate or none)."
        ),
        "data": ENCODED,
    }
    return b'{"jsonrpc":"2.0","id":' + message_id + b',"error":' + json.dumps(error).encode() + b"}\n"


def request_id(request: httpx2.Request) -> bytes:
    """The JSON-RPC id of the request (as JSON), or null when it has none we can read."""
    try:
        sent = json.loads(request.content or b"null")
    except (ValueError, httpx2.RequestNotRead):
        return b"null"
    found = sent.get("id") if isinstance(sent, dict) else None
    return json.dumps(found).encode() if isinstance(found, int | str) else b"null"


class Unpacked(httpx2.AsyncByteStream):
    """A gzip or deflate body unpacked as it streams in, at most `PIECE` bytes per step, so the
    bound after it counts (and stops) the unpacked bytes, not the packed ones."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        # 32 + MAX_WBITS reads a gzip or a zlib header alike ("deflate" is zlib-wrapped in HTTP).
        self.unpacker = zlib.decompressobj(32 + zlib.MAX_WBITS)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            pending = chunk
            while pending:
                piece = self.unpacker.decompress(pending, PIECE)
                if piece:
                    yield piece
                pending = self.unpacker.unconsumed_tail
        rest = self.unpacker.flush()
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self.stream.aclose()


class BoundedBody(httpx2.AsyncByteStream):
    """A response body passed on whole if it is within `limit` bytes, else replaced by a
    JSON-RPC error for the request, the rest left unread."""

    def __init__(self, stream: Any, limit: int, message_id: bytes, declared: int | None) -> None:
        self.stream, self.limit, self.message_id, self.declared = stream, limit, message_id, declared
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.declared is not None and self.declared > self.limit:
            await self.stream.aclose()
            yield refusal(self.message_id, self.limit)
            return
        held: list[bytes] = []
        async for chunk in self.stream:
            self.read += len(chunk)
            if self.read > self.limit:
                log.warning("An MCP server's answer passed %d bytes: refused, the rest left unread", self.limit)
                await self.stream.aclose()
                yield refusal(self.message_id, self.limit)
                return
            held.append(chunk)
        yield b"".join(held)

    async def aclose(self) -> None:
        await self.stream.aclose()


def hook(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """The response hook that bounds every answer but an event stream's."""

    async def bound(response: httpx2.Response) -> None:
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        encoding = response.headers.get("content-encoding", "").strip().lower()
        message_id = request_id(response.request)
        if encoding in UNPACKED:
            # Unpacked here, so the client sees (and the bound counts) plain bytes; the declared
            # length was the packed one.
            del response.headers["content-encoding"]
            if "content-length" in response.headers:
                del response.headers["content-length"]
            response.stream = Unpacked(response.stream)
            encoding = ""
        if encoding not in ("", "identity"):
            # Not decoded at all: the refusal stands in for it (also for an event stream).
            del response.headers["content-encoding"]
            response.headers["content-type"] = "application/json"
            if isinstance(response.stream, httpx2.AsyncByteStream):
                await response.stream.aclose()
            response.stream = httpx2.ByteStream(encoded_refusal(message_id))
            return
        if kind == EVENT_STREAM:
            return
        try:
            declared: int | None = int(response.headers.get("content-length", ""))
        except ValueError:
            declared = None
        response.stream = BoundedBody(response.stream, limit, message_id, declared)

    return bound
