"""A fake OpenAI-compatible streaming server: `POST /v1/chat/completions` with `stream: true`.

Tessera reaches it through LiteLLM as `openai/<name>` with an `api_base`, exactly like a real
vLLM or llama.cpp server. What it streams is driven by a directive in the last user message,
so every request carries its own plan and the server keeps no per-test state:

    [bench tag=17 n=400 tps=50 ttft=0 para=40 tools=2]

- `tag`   a number naming the turn; every text token is a marker `q<tag>v<index>` (plain
          alphanumerics survive markdown rendering and HTML escaping unchanged);
- `n`     text tokens; `tps` tokens per second; `ttft` seconds before the first token;
- `para`  tokens per paragraph (blank lines make finished markdown blocks, which Tessera
          re-sends rendered: the benchmark must see both shapes);
- `tools` parallel tool calls in the first step, their JSON arguments streamed in fragments;
          the text comes in the next step, after the tool results.

The server records, on `time.monotonic()` (one clock for every process on the machine), when
each marker was written to the socket; `GET /_bench/log` hands those records over (and forgets
them). It runs as its own process (`python -m bench.fake_provider`) so that the load client's
event loop never delays token emission, and vice versa.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import time
from dataclasses import dataclass
from typing import Any

DIRECTIVE = re.compile(r"\[bench ([^\]]*)\]")
MARKER = re.compile(r"\bq(\d+)v(\d+)\b")
TOOL_NAME = "toolset__clock_math__calculate"


def marker(tag: int, index: int) -> str:
    return f"q{tag}v{index}"


@dataclass
class Plan:
    tag: int = 0
    n: int = 100
    tps: float = 50.0
    ttft: float = 0.0
    para: int = 40
    tools: int = 0

    @classmethod
    def parse(cls, text: str) -> Plan:
        plan = cls()
        match = DIRECTIVE.search(text)
        if match:
            for item in match.group(1).split():
                key, _, value = item.partition("=")
                if key in ("tag", "n", "para", "tools"):
                    setattr(plan, key, int(value))
                elif key in ("tps", "ttft"):
                    setattr(plan, key, float(value))
        return plan

    def directive(self) -> str:
        return (
            f"[bench tag={self.tag} n={self.n} tps={self.tps:g} ttft={self.ttft:g} para={self.para} tools={self.tools}]"
        )

    def token(self, index: int) -> str:
        """Token `index` of the answer: a marker, after a space or a paragraph break."""
        if index == 0:
            sep = ""
        elif self.para and index % self.para == 0:
            sep = "\n\n"
        else:
            sep = " "
        return sep + marker(self.tag, index)

    def text(self) -> str:
        return "".join(self.token(i) for i in range(self.n))


@dataclass
class TagLog:
    request_at: float = 0.0
    emitted: dict[int, float] | None = None  # marker index → monotonic time written
    end_at: float = 0.0  # the finishing chunk of the text step

    def as_json(self) -> dict[str, Any]:
        return {"request_at": self.request_at, "emitted": self.emitted or {}, "end_at": self.end_at}


class FakeProvider:
    def __init__(self) -> None:
        self.log: dict[int, TagLog] = {}
        self.requests = 0
        self.connections = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        # A deep backlog: hundreds of turns open their connections within a second.
        self.server = await asyncio.start_server(self._serve, host, port, backlog=2048)
        return int(self.server.sockets[0].getsockname()[1])

    # --- HTTP/1.1, just enough of it: keep-alive, Content-Length bodies, chunked responses ----
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {}
                for line in header_lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                    await self._completions(json.loads(body or b"{}"), writer)
                elif method == "GET" and path.startswith("/_bench/log"):
                    data = {str(tag): entry.as_json() for tag, entry in self.log.items()}
                    self.log.clear()
                    self._respond(writer, 200, json.dumps(data).encode(), "application/json")
                elif method == "GET" and path.startswith("/_bench/stats"):
                    # How many TCP connections the clients opened for how many completions:
                    # a client that reuses connections opens far fewer than one per request.
                    stats = {"requests": self.requests, "connections": self.connections}
                    self._respond(writer, 200, json.dumps(stats).encode(), "application/json")
                elif method == "GET" and path.startswith("/_bench/health"):
                    self._respond(writer, 200, b'{"ok": true}', "application/json")
                else:
                    self._respond(writer, 404, b'{"error": "not found"}', "application/json")
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "OK")
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    # --- /v1/chat/completions -------------------------------------------------------------------
    async def _completions(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        messages = body.get("messages") or []
        if not body.get("stream"):
            self._respond(writer, 400, b'{"error": {"message": "only stream=true is faked"}}', "application/json")
            return
        plan = Plan.parse(_last_user_text(messages))
        first_step = bool(messages) and messages[-1].get("role") == "user"
        entry = self.log.setdefault(plan.tag, TagLog(request_at=time.monotonic(), emitted={}))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        stream = _Stream(writer, body.get("model", "bench"))
        start = time.monotonic()
        if plan.ttft:
            await asyncio.sleep(plan.ttft)
        if plan.tools and first_step and body.get("tools"):
            tool_name = (body["tools"][0].get("function") or {}).get("name", TOOL_NAME)
            await self._tool_calls(stream, plan, tool_name, start)
            finish = "tool_calls"
        else:
            await self._text(stream, plan, entry, start)
            finish = "stop"
        await stream.send({"delta": {}, "finish_reason": finish})
        if finish == "stop":
            entry.end_at = time.monotonic()
        if (body.get("stream_options") or {}).get("include_usage"):
            await stream.send_raw(
                {
                    "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": plan.n, "total_tokens": 10 + plan.n},
                }
            )
        writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    async def _text(self, stream: _Stream, plan: Plan, entry: TagLog, start: float) -> None:
        assert entry.emitted is not None
        await stream.send({"delta": {"role": "assistant", "content": ""}, "finish_reason": None})
        for index in range(plan.n):
            # An absolute schedule: a late wake-up does not push every later token back.
            await _sleep_until(start + plan.ttft + index / plan.tps)
            await stream.send({"delta": {"content": plan.token(index)}, "finish_reason": None}, entry, index)

    async def _tool_calls(self, stream: _Stream, plan: Plan, tool_name: str, start: float) -> None:
        """Parallel calls, OpenAI style: id and name first, then the arguments in small pieces."""
        step = 0
        for position in range(plan.tools):
            arguments = json.dumps({"expression": f"{position + 2}*7"})
            pieces = [arguments[i : i + 5] for i in range(0, len(arguments), 5)]
            head = {"index": position, "id": f"call_{plan.tag}_{position}", "type": "function"}
            await _sleep_until(start + plan.ttft + step / plan.tps)
            step += 1
            await stream.send(
                {
                    "delta": {"tool_calls": [{**head, "function": {"name": tool_name, "arguments": ""}}]},
                    "finish_reason": None,
                }
            )
            for piece in pieces:
                await _sleep_until(start + plan.ttft + step / plan.tps)
                step += 1
                await stream.send(
                    {
                        "delta": {"tool_calls": [{"index": position, "function": {"arguments": piece}}]},
                        "finish_reason": None,
                    }
                )


class _Stream:
    def __init__(self, writer: asyncio.StreamWriter, model: str) -> None:
        self.writer = writer
        self.base = {"id": f"chatcmpl-bench{id(self)}", "object": "chat.completion.chunk", "created": int(time.time())}
        self.base["model"] = model

    async def send(self, choice: dict[str, Any], entry: TagLog | None = None, index: int = -1) -> None:
        await self.send_raw({"choices": [{"index": 0, **choice}]}, entry, index)

    async def send_raw(self, fields: dict[str, Any], entry: TagLog | None = None, index: int = -1) -> None:
        data = b"data: " + json.dumps({**self.base, **fields}, separators=(",", ":")).encode() + b"\n\n"
        if entry is not None and entry.emitted is not None:
            # Stamped just before the write: an asyncio transport sends at once when its buffer
            # is empty, so this is when the bytes leave for the kernel.
            entry.emitted[index] = time.monotonic()
        self.writer.write(_chunk(data))
        await self.writer.drain()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


async def _main(host: str, port: int) -> None:
    provider = FakeProvider()
    bound = await provider.start(host, port)
    # The parent reads this line to learn the port.
    print(f"PORT {bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(_main(args.host, args.port))


if __name__ == "__main__":
    main()
