"""An HTTP MCP server's oversized answer (toolsets/mcp/bounded.py): read no further than the
bound whatever its Content-Length says (true, absent, lying) or however it streams (chunked,
until the connection closes, as a server-sent event); the page is refused at once with a clear
reason, and the server could not push the rest of its answer into Tessera."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from typing import Any

import httpx2
import pytest
from django.conf import settings
from django.test import override_settings

from tests.toolsets.mcp.conftest import register
from tests.toolsets.mcp.oversized_http_server import OversizedServer
from toolsets.mcp import bounded
from toolsets.mcp.app_resources import PAGES_BUDGET_S
from toolsets.mcp.models import AppResource

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = {"MCP_APP_MAX_BYTES": 200_000, "MCP_STDIO_MAX_MESSAGE_BYTES": 100_000}
SIZE = 50_000_000


def _sent(hostile: OversizedServer) -> int:
    """What the server wrote of its huge answer once it stopped (the client closed on it)."""
    deadline = time.monotonic() + 30
    while not hostile.sent and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hostile.sent, "the server is still writing its answer: the client never closed on it"
    assert not any(hostile.finished), "the whole answer was read"
    return hostile.sent[0]


@pytest.mark.parametrize("mode", ["declared", "chunked", "close", "events"])
def test_an_oversized_page_over_http_is_refused_as_it_streams_in(mode: str) -> None:
    with override_settings(TESSERA={**settings.TESSERA, **SMALL}), OversizedServer(mode, SIZE) as hostile:
        started = time.monotonic()
        server: Any = register(name="Big", slug="big", transport="http", url=hostile.url, timeout_s=30)
        took = time.monotonic() - started
        sent = _sent(hostile)
    big = next(t for t in server.tools if t["name"] == "big")
    assert "sha256" not in big["ui"]
    assert big["ui"]["refused"] == "it is larger than 0.2 MB, the most a page may be"
    assert took < PAGES_BUDGET_S  # refused by its size, not by the clock
    # Loopback buffers hold a few MB at most: the rest was never sent, let alone read.
    assert sent < SIZE // 2, sent
    assert not AppResource.objects.filter(uri="ui://big/page.html").exists()


def test_a_lying_content_length_cannot_make_tessera_read_more(transactional_db: Any) -> None:
    # It claims 300 bytes and sends 50 MB: the 300 are read, which are no page.
    with override_settings(TESSERA={**settings.TESSERA, **SMALL}), OversizedServer("lying", SIZE) as hostile:
        server: Any = register(name="Big", slug="big", transport="http", url=hostile.url, timeout_s=30)
        sent = _sent(hostile)
    big = next(t for t in server.tools if t["name"] == "big")
    assert "sha256" not in big["ui"] and not AppResource.objects.exists()
    assert "its page ui://big/page.html was not kept (reading it failed" in server.refresh_message
    assert sent < SIZE // 2, sent


class Streamed(httpx2.AsyncByteStream):
    """A body handed over in pieces, counting what was taken from it."""

    def __init__(self, body: bytes, piece: int = 4096) -> None:
        self.body, self.piece, self.taken = body, piece, 0

    async def __aiter__(self) -> Any:
        for start in range(0, len(self.body), self.piece):
            self.taken += self.piece
            yield self.body[start : start + self.piece]


async def _post(body: Streamed, encoding: str, limit: int) -> dict[str, Any]:
    def answer(request: httpx2.Request) -> httpx2.Response:
        assert request.headers["accept-encoding"] == "identity"
        headers = {"content-encoding": encoding, "content-type": "application/json"}
        return httpx2.Response(200, stream=body, headers=headers)

    hooks = {"response": [bounded.hook(limit)]}
    async with httpx2.AsyncClient(
        transport=httpx2.MockTransport(answer), headers=bounded.HEADERS, event_hooks=hooks
    ) as client:
        response = await client.post(
            "http://server.test/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "resources/read"}
        )
        return dict(json.loads(await response.aread()))


async def test_a_compressed_answer_within_the_bound_is_heard() -> None:
    # Asked for none, a server (or a proxy) may compress all the same: Tessera still hears it.
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"contents": [{"uri": "ui://a", "text": "y" * 5000}]}}
    for encoding, packed in (("gzip", gzip.compress), ("deflate", zlib.compress)):
        body = await _post(Streamed(packed(json.dumps(answer).encode())), encoding, 100_000)
        assert body == answer, encoding


async def test_a_compression_bomb_stops_at_the_bound_counted_unpacked() -> None:
    # A few KB of gzip that unpack to 50 MB: the bound counts unpacked bytes, and reading stops
    # at it, long before the packed body is taken whole.
    packed = gzip.compress(b"x" * 50_000_000)
    streamed = Streamed(packed, piece=256)
    body = await _post(streamed, "gzip", 1000)
    assert body["id"] == 7 and body["error"]["data"] == "tessera:message-too-large", body
    assert streamed.taken < len(packed) // 10, (streamed.taken, len(packed))


async def test_an_encoding_tessera_cannot_unpack_is_refused_unread() -> None:
    streamed = Streamed(b"\x00" * 10_000)
    body = await _post(streamed, "br", 100_000)
    assert body["id"] == 7 and body["error"]["data"] == bounded.ENCODED
    assert "compressed in a way Tessera does not unpack" in body["error"]["message"]
    assert streamed.taken == 0
