"""Runs a stdio MCP server and passes its messages on, refusing any larger than a bound as its
bytes stream in (toolsets.mcp.transport starts servers through it).

Why a process between the two: the SDK's stdio reader keeps a line's text until its end, joining
it anew with every chunk, so a server writing one 50 MB message holds a worker for minutes before
anything can look at its size. Here a message's bytes are counted as they arrive; past the bound
the rest of the line is thrown away unread, and the request it answers gets a JSON-RPC error at
once (the id is read from the line's head; a server that writes the id last gets it when the
line ends, a pipe's speed later). Nothing of the message reaches the SDK.

Standard library only, started with `python -S`: `guard.py MAX_BYTES -- COMMAND [ARG...]`. It is
in the server's process group (the SDK starts it in a new session), so stopping the server stops
both; stdin, stderr and the exit status are the server's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable

CHUNK = 1 << 16
EDGE = 512  # bytes of a line's head and tail kept to find its id
# The data of the error a refused message is answered with: toolsets.mcp.app_resources reads it.
REFUSED = "tessera:message-too-large"
_ID = rb'(-?\d{1,20}|"[^"\\]{0,200}")'
_HEAD = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_TAIL = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def refusal(message_id: bytes, limit: int) -> bytes:
    error = {
        "code": -32603,
        "message": f"Tessera refused the server's answer: it is larger than {limit / 1_000_000:g} MB.",
        "data": REFUSED,
    }
    return b'{"jsonrpc":"2.0","id":' + message_id + b',"error":' + json.dumps(error).encode() + b"}\n"


class Lines:
    """Splits a byte stream into lines, passing on those within `limit` bytes whole and
    answering the others with `refusal`."""

    def __init__(self, limit: int, write: Callable[[bytes], None]) -> None:
        self.limit = limit
        self.write = write
        self.held: list[bytes] = []
        self.size = 0
        self.dropping = False
        self.answered = False
        self.head = b""
        self.tail = b""

    def feed(self, data: bytes) -> None:
        while data:
            end = data.find(b"\n")
            part, data = (data, b"") if end < 0 else (data[: end + 1], data[end + 1 :])
            self._add(part)
            if end >= 0:
                self._line_end()

    def _add(self, part: bytes) -> None:
        self.size += len(part)
        if len(self.head) < EDGE:
            self.head += part[: EDGE - len(self.head)]
        if self.dropping:
            self.tail = (self.tail + part[-EDGE:])[-EDGE:]
            return
        self.held.append(part)
        if self.size > self.limit:
            self.tail = b"".join(self.held[-2:])[-EDGE:]
            self.dropping, self.held = True, []
            found = _HEAD.match(self.head)
            if found:
                self._answer(found.group(1))

    def _line_end(self) -> None:
        if not self.dropping:
            self.write(b"".join(self.held))
        elif not self.answered:
            found = _TAIL.search(self.tail.rstrip())
            if found:
                self._answer(found.group(1))
        self.held, self.size, self.dropping, self.answered, self.head, self.tail = [], 0, False, False, b"", b""

    def _answer(self, message_id: bytes) -> None:
        self.answered = True
        self.write(refusal(message_id, self.limit))


def _pump_stdin(child: subprocess.Popen[bytes]) -> None:
    assert child.stdin is not None
    try:
        while chunk := os.read(0, CHUNK):
            child.stdin.write(chunk)
            child.stdin.flush()
    except OSError:
        pass
    finally:
        try:
            child.stdin.close()
        except OSError:
            pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: stdio_guard.py MAX_BYTES -- COMMAND [ARG...]\n")
        return 2
    limit = int(argv[0])
    try:
        child = subprocess.Popen(argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    except OSError as exc:
        sys.stderr.write(f"Cannot start {argv[2]}: {exc}\n")
        return 127
    threading.Thread(target=_pump_stdin, args=(child,), daemon=True).start()

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view) :]

    lines = Lines(limit, write)
    assert child.stdout is not None
    try:
        while chunk := os.read(child.stdout.fileno(), CHUNK):
            lines.feed(chunk)
    except (BrokenPipeError, OSError):
        child.terminate()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
