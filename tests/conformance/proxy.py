"""A pass-through HTTP proxy that adds an `Authorization: Bearer …` header, for clients that cannot
send one: the conformance suite's server mode has no option for credentials, and Tessera's /mcp
answers 401 without them. Everything else — method, path, body, the Host and Origin headers (the
DNS-rebinding scenario depends on them), streamed responses — goes through untouched, so what
Tessera sees is what the suite sent plus the token any real client would be configured with.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


class AuthProxy:
    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
        if not any(k.lower() == "authorization" for k, _ in headers):
            headers.append(("Authorization", f"Bearer {self.token}"))
        url = self.upstream + scope["path"] + (("?" + scope["query_string"].decode()) if scope["query_string"] else "")
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client:
            request = client.build_request(scope["method"], url, headers=headers, content=body)
            response = await client.send(request, stream=True)
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": [
                            (k.encode("latin-1"), v.encode("latin-1"))
                            for k, v in response.headers.multi_items()
                            if k.lower() not in HOP_BY_HOP
                        ],
                    }
                )
                with contextlib.suppress(httpx.HTTPError):  # Tessera ended the stream: so do we
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                await response.aclose()


@contextlib.contextmanager
def running(upstream: str, token: str) -> Iterator[str]:
    """The proxy on a free local port for the duration; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(AuthProxy(upstream, token), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the proxy did not start")
        time.sleep(0.05)
    try:
        yield f"http://localhost:{port}"
    finally:
        server.should_exit = server.force_exit = True  # open event streams must not hold it up
        thread.join(10)
