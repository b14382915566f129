"""A hostile MCP server over HTTP, for tests: the handshake and one tool naming an MCP App page,
whose `resources/read` answer is far larger than Tessera keeps, sent as `mode` says:

- "declared": with its true (huge) Content-Length;
- "chunked": chunked, no Content-Length;
- "close": no Content-Length, the body ending when the connection closes;
- "lying": a Content-Length of a few hundred bytes, then the whole huge body anyway;
- "events": as one huge server-sent event.

It counts the bytes of each huge answer it managed to write (`sent`) before the client stopped
reading; standard library only, in a thread (`with OversizedServer(mode) as server:`)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PAGE_URI = "ui://big/page.html"
CHUNK = 1 << 16


class OversizedServer:
    def __init__(self, mode: str, size: int = 50_000_000) -> None:
        self.mode, self.size = mode, size
        self.sent: list[int] = []
        self.finished: list[bool] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._plain(405, b"")

            def do_DELETE(self) -> None:
                self._plain(200, b"")

            def do_POST(self) -> None:
                message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                method, message_id = message.get("method"), message.get("id")
                if message_id is None:
                    self._plain(202, b"")
                elif method == "initialize":
                    self._result(
                        message_id,
                        {
                            "protocolVersion": message["params"]["protocolVersion"],
                            "capabilities": {"tools": {}, "resources": {}},
                            "serverInfo": {"name": "oversized", "version": "1"},
                        },
                    )
                elif method == "tools/list":
                    tool = {
                        "name": "big",
                        "inputSchema": {"type": "object"},
                        "_meta": {"ui": {"resourceUri": PAGE_URI}},
                    }
                    self._result(message_id, {"tools": [tool]})
                elif method == "resources/read":
                    owner._huge(self, message_id)
                else:
                    error = {"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": "Not found"}}
                    self._plain(200, json.dumps(error).encode(), "application/json")

            def _result(self, message_id: Any, result: dict[str, Any]) -> None:
                body = json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}).encode()
                self._plain(200, body, "application/json")

            def _plain(self, status: int, body: bytes, kind: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mcp"

    def _huge(self, handler: BaseHTTPRequestHandler, message_id: Any) -> None:
        head = json.dumps({"jsonrpc": "2.0", "id": message_id}).encode()[:-1]
        head += (
            b',"result":{"contents":[{"uri":"'
            + PAGE_URI.encode()
            + b'","mimeType":"text/html;profile=mcp-app","text":"<p>'
        )
        tail = b'"}]}}'
        if self.mode == "events":
            head, tail = b"event: message\ndata: " + head, tail + b"\n\n"
        total = len(head) + self.size + len(tail)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream" if self.mode == "events" else "application/json")
        if self.mode == "declared":
            handler.send_header("Content-Length", str(total))
        elif self.mode == "lying":
            handler.send_header("Content-Length", "300")
        elif self.mode == "chunked":
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        sent, finished = 0, False

        def write(data: bytes) -> None:
            nonlocal sent
            if self.mode == "chunked":
                data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            handler.wfile.write(data)
            sent += len(data)

        try:
            write(head)
            block = b"x" * CHUNK
            for start in range(0, self.size, CHUNK):
                write(block[: min(CHUNK, self.size - start)])
            write(tail)
            if self.mode == "chunked":
                handler.wfile.write(b"0\r\n\r\n")
            finished = True
        except OSError:  # the client stopped reading and closed the connection
            pass
        self.sent.append(sent)
        self.finished.append(finished)
        handler.close_connection = True

    def __enter__(self) -> OversizedServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
