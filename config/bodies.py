"""The web process refuses a request body over its limit while it arrives.

Twisted's HTTP server, under Daphne, collects a whole body (in memory up to 100 kB, then in a
temporary file) before Daphne hands any of it to the ASGI application: a chunked or unsized
upload of any size lands on the web host's disk before Django's limits or
`core.asgi.BodyLimit` see a byte. Here the declared length is checked as soon as the headers are
in, and the bytes are counted as they come; past the path's limit (`core.asgi.body_limit`) the
client gets 413 and the connection is closed, and nothing more is kept.
"""

from __future__ import annotations

from typing import Any

from daphne.http_protocol import WebRequest


def install() -> None:
    if getattr(WebRequest, "_tessera_bounded", False):
        return
    got_length = WebRequest.gotLength
    content_chunk = WebRequest.handleContentChunk

    def bounded_got_length(self: Any, length: int | None) -> None:
        from core.asgi import body_limit

        path = bytes(getattr(self.channel, "_path", b"") or b"").split(b"?", 1)[0]
        self._body_limit = body_limit(path.decode("latin-1"))
        self._body_received = 0
        self._body_refused = False
        if length is not None and length > self._body_limit:
            _refuse(self)
            return
        got_length(self, length)

    def bounded_content_chunk(self: Any, data: bytes) -> None:
        if getattr(self, "_body_refused", False):
            return
        self._body_received = getattr(self, "_body_received", 0) + len(data)
        if self._body_received > getattr(self, "_body_limit", self._body_received):
            _refuse(self)
            return
        content_chunk(self, data)

    WebRequest.gotLength = bounded_got_length
    WebRequest.handleContentChunk = bounded_content_chunk
    WebRequest._tessera_bounded = True


def _refuse(request: Any) -> None:
    request._body_refused = True
    content = getattr(request, "content", None)
    if content is not None:
        content.close()  # what arrived so far is dropped
    from core.asgi import error_body

    limit_mb = request._body_limit // (1024 * 1024)
    path = bytes(getattr(request.channel, "_path", b"") or b"").split(b"?", 1)[0].decode("latin-1")
    # In the shape the path's clients read (OpenAI's under /v1/, JSON-RPC's at /mcp).
    body = error_body(path, f"The request body is larger than {limit_mb} MB.")
    head = (
        "HTTP/1.1 413 Content Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    transport = request.channel.transport
    transport.write(head + body)
    transport.loseConnection()
