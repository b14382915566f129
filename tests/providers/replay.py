"""A local OpenAI-compatible server that replays recorded-style streams.

Each test gives it a script: one `Reply` per request it expects, in order (the last one
repeats, so "429 forever" or "a model that calls tools forever" is one reply). It records every
request (body and headers) so a test can check what a provider would have received: the
follow-up transcript, the retry count, the parameters.

Threaded and on loopback: it serves Tessera's real HTTP client (LiteLLM, or any later fast
path behind the same seam) exactly as a remote provider would, including HTTP errors, a
`Retry-After` header and a connection dropped mid-stream.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One response. `chunks` are the `data:` payloads of an SSE stream (dicts, sent as JSON;
    a `choices` list is sent as is, anything else is wrapped as the one choice); `status` other
    than 200 sends `error` as a JSON body instead; `cut_after` drops the connection after that
    many chunks, without finishing the chunked body; `gap_s` pauses before each chunk."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    cut_after: int | None = None
    done: bool = True  # the closing `data: [DONE]`
    gap_s: float = 0.0  # a pause before each chunk (a slow model)


@dataclass
class Request:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that drops a connection it no longer needs is not a test failure; anything
        # else still is reported.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ReplayServer:
    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[Request] = []
        # A context window, as a real provider enforces it: a request of more tokens (LiteLLM's
        # count for gpt-4o, messages and tools) is refused with OpenAI's context-length error,
        # without using up a reply. `sizes` keeps each request's count.
        self.window: int | None = None
        self.sizes: list[int] = []
        self._lock = threading.Lock()
        server = self
        self._httpd = _Server(("127.0.0.1", 0), _handler_for(server))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="replay-provider", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def play(self, *replies: Reply) -> None:
        with self._lock:
            self.script = list(replies)
            self.requests = []

    def _next(self, request: Request) -> Reply:
        refused = _over_window(self, request)
        if refused is not None:
            return refused
        with self._lock:
            self.requests.append(request)
            if not self.script:
                return Reply(status=500, error={"error": {"message": "the replay script is empty"}})
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def _over_window(server: ReplayServer, request: Request) -> Reply | None:
    if server.window is None:
        return None
    import litellm

    size = litellm.token_counter(model="gpt-4o", messages=request.messages, tools=request.body.get("tools"))
    with server._lock:
        server.sizes.append(size)
        if size <= server.window:
            return None
        server.requests.append(request)
    message = (
        f"This model's maximum context length is {server.window} tokens. However, your messages "
        f"resulted in {size} tokens. Please reduce the length of the messages."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return Reply(status=400, error={"error": error})


def _handler_for(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            request = Request(json.loads(raw or b"{}"), {k.lower(): v for k, v in self.headers.items()}, time.time())
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply = server._next(request)
            if reply.status != 200:
                self._json(reply.status, reply.error or {"error": {"message": "error"}}, reply.headers)
                return
            self._stream(reply, str(request.body.get("model", "replay")))

        def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for count, payload in enumerate(_events(reply.chunks, model)):
                if reply.cut_after is not None and count >= reply.cut_after:
                    # A dropped connection: no terminating chunk, the socket just goes away —
                    # a moment after the last chunk, as on a real network (LiteLLM's client drops
                    # what arrived in the same read as the reset; the fast path keeps it).
                    self.wfile.flush()
                    time.sleep(0.2)
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if reply.gap_s:
                    time.sleep(reply.gap_s)
                self._chunk(b"data: " + payload + b"\n\n")
            if reply.done:
                self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def _events(chunks: list[dict[str, Any]], model: str) -> Iterator[bytes]:
    base = {"id": "chatcmpl-replay", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    for chunk in chunks:
        body = {**base, **chunk} if "choices" in chunk else {**base, "choices": [{"index": 0, **chunk}]}
        yield json.dumps(body, separators=(",", ":")).encode()
