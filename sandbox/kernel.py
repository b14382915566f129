"""The Python process inside the sandbox: one per chat session, holding the session's globals.

It is started by `sandbox.session` inside bubblewrap and never imported by Tessera itself (it
uses the standard library only, and runs under the sandbox's own interpreter). Before any code
of the user's runs it lowers its own resource limits, which its children inherit and nothing in
the sandbox can raise again.

The protocol is one JSON object a line. In (on the original stdin): `{"code": "..."}`. Out (on
the original stdout): `{"t": "ready"}` once, then per call any number of
`{"t": "out", "s": "stdout"|"stderr", "d": text}`, `{"t": "figure", "d": base64 PNG}`,
`{"t": "file", "name": relative path, "d": base64}` or `{"t": "skipped", "name", "size"}`, and
one `{"t": "done", "ok": bool, "error": text}`. The code's own stdin is /dev/null, and its
stdout and stderr (file descriptors 1 and 2, so subprocesses' output too) go through pipes this
process reads. The host believes nothing it says beyond its bounds: the code could write to the
protocol's descriptor as well, and could only lie to its own user that way.
"""

from __future__ import annotations

import ast
import base64
import codecs
import io
import json
import linecache
import os
import resource
import sys
import threading
import traceback
from typing import Any

OUTPUT = "/output"
MARK = b"\x00\x1etessera-call-end\x1e\x00"


class Channel:
    def __init__(self, fd: int) -> None:
        self.file = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.file.write(json.dumps(message) + "\n")
            self.file.flush()


class Pump(threading.Thread):
    """Reads what the code writes to one descriptor and sends it on, up to the call's share of
    the output limit; the end-of-call mark tells the call's output is all read."""

    def __init__(self, channel: Channel, fd: int, name: str, budget: list[int]) -> None:
        super().__init__(daemon=True, name=f"pump-{name}")
        self.channel, self.name, self.budget = channel, name, budget
        read, write = os.pipe()
        os.dup2(write, fd)
        os.close(write)
        self.read_fd = read
        self.drained = threading.Event()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def run(self) -> None:
        pending = b""
        while True:
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return
            data = pending + chunk
            while MARK in data:
                before, _, data = data.partition(MARK)
                self.emit(before, final=True)
                self.drained.set()
            # A tail that might be the start of a mark is held until the next read.
            start = data.find(MARK[:1], max(0, len(data) - len(MARK) + 1))
            pending = data[start:] if start >= 0 and MARK.startswith(data[start:]) else b""
            self.emit(data[: len(data) - len(pending)])

    def emit(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final=final)
        if not text:
            return
        with self.channel.lock:
            left = self.budget[0]
            self.budget[0] -= len(text)
        if left <= 0:
            return
        if len(text) > left:
            text = text[:left] + "\n[Output limit reached: the rest of this call's output was dropped.]\n"
        self.channel.send({"t": "out", "s": self.name, "d": text})


PROXY_SOCKET = "/run/tessera/net.sock"
PROXY_PORT = 3128


def relay_network() -> None:
    """The jail's one way out (sandbox/netproxy.py): 127.0.0.1:3128 relayed to the worker's proxy
    socket, in one thread (threads count against the process limit), and the proxy variables
    ordinary clients read. The proxy decides what may be reached; this only carries bytes."""
    import selectors
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PROXY_PORT))
    listener.listen(16)
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)

    def drop(sock: socket.socket, peer: socket.socket) -> None:
        for one in (sock, peer):
            try:
                selector.unregister(one)
            except (KeyError, ValueError):
                pass
            one.close()

    def serve() -> None:
        while True:
            for key, _ in selector.select():
                if key.data is None:
                    try:
                        inside, _ = listener.accept()
                        outside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        outside.connect(PROXY_SOCKET)
                    except OSError:
                        continue
                    selector.register(inside, selectors.EVENT_READ, outside)
                    selector.register(outside, selectors.EVENT_READ, inside)
                    continue
                sock = key.fileobj
                if sock.fileno() < 0:  # type: ignore[union-attr]
                    continue  # its peer ended the pair earlier in this same batch
                try:
                    data = sock.recv(65536)  # type: ignore[union-attr]
                    if data:
                        key.data.setblocking(True)
                        key.data.sendall(data)
                        continue
                except OSError:
                    pass
                drop(sock, key.data)  # type: ignore[arg-type]

    threading.Thread(target=serve, daemon=True, name="net-relay").start()
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ[name] = proxy


def limit(limits: dict[str, int]) -> None:
    def cap(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    cap(resource.RLIMIT_AS, limits["memory_mb"] * 1024 * 1024)
    cap(resource.RLIMIT_NPROC, limits["processes"])
    cap(resource.RLIMIT_NOFILE, limits["open_files"])
    cap(resource.RLIMIT_FSIZE, limits["disk_mb"] * 1024 * 1024)
    cap(resource.RLIMIT_CORE, 0)
    # The hard CPU limit is the session's; each call lowers the soft one to its own share.
    resource.setrlimit(resource.RLIMIT_CPU, (limits["session_cpu_s"], limits["session_cpu_s"]))


def cpu_for_call(seconds: int) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime) + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, (min(hard, spent + seconds), hard))


def files_now() -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for folder, _dirs, names in os.walk(OUTPUT):
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if os.path.isfile(path) and not os.path.islink(path):
                found[os.path.relpath(path, OUTPUT)] = (info.st_mtime_ns, info.st_size)
    return found


def send_files(channel: Channel, before: dict[str, tuple[int, int]], limits: dict[str, int]) -> None:
    room = limits["files_mb"] * 1024 * 1024
    changed = [(name, state) for name, state in sorted(files_now().items()) if before.get(name) != state]
    for count, (name, (_mtime, size)) in enumerate(changed):
        if count >= limits["max_files"] or size > room:
            channel.send({"t": "skipped", "name": name, "size": size})
            continue
        try:
            # O_NOFOLLOW: a file swapped for a link since the listing is not followed.
            fd = os.open(os.path.join(OUTPUT, name), os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(room + 1)
        except OSError:
            continue
        room -= len(data)
        channel.send({"t": "file", "name": name, "d": base64.b64encode(data).decode()})


def send_figures(channel: Channel, limits: dict[str, int]) -> None:
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in list(pyplot.get_fignums())[: limits["max_figures"]]:
        figure = pyplot.figure(number)
        buffer = io.BytesIO()
        try:
            figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        except Exception as exc:  # a figure that cannot draw says so, the others still come
            channel.send({"t": "out", "s": "stderr", "d": f"A figure could not be drawn: {exc}\n"})
            continue
        data = buffer.getvalue()
        if len(data) <= limits["figure_kb"] * 1024:
            channel.send({"t": "figure", "d": base64.b64encode(data).decode()})
    pyplot.close("all")


def execute(code: str, namespace: dict[str, Any]) -> str:
    """Runs `code` like a notebook cell (a last expression's value is printed); the error's
    traceback, or ""."""
    # Tracebacks quote the lines of the code, as they would of a file.
    linecache.cache["<code>"] = (len(code), None, code.splitlines(True), "<code>")
    try:
        tree = ast.parse(code, "<code>", "exec")
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body.pop()
        exec(compile(tree, "<code>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<code>", "eval"), namespace)
            if value is not None:
                print(repr(value))
        return ""
    except SystemExit as exc:
        return f"The code called exit({exc.code!r}); the session goes on."
    except BaseException as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        # The kernel's own frames are not the user's business.
        user = [f for f in frames if f.filename == "<code>"]
        lines = traceback.format_list(user) if user else []
        return (
            "Traceback (most recent call last):\n"
            + "".join(lines)
            + "".join(traceback.format_exception_only(type(exc), exc))
        )


def main() -> None:
    limits = json.loads(sys.argv[1])
    if limits.get("network"):
        relay_network()
    limit(limits)
    channel = Channel(os.dup(1))
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    budget = [0]
    pumps = [Pump(channel, 1, "stdout", budget), Pump(channel, 2, "stderr", budget)]
    for pump in pumps:
        pump.start()
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, write_through=True)
    import warnings

    # Figures are collected after each call: plt.show() on the Agg backend has nothing to do.
    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    channel.send({"t": "ready"})
    for line in requests:
        request = json.loads(line)
        budget[0] = limits["output_chars"]
        before = files_now()
        cpu_for_call(limits["cpu_s"])
        error = execute(str(request.get("code", "")), namespace)
        if error:
            os.write(2, error.encode("utf-8", "replace"))
        for pump in pumps:
            pump.drained.clear()
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(1, MARK)
        os.write(2, MARK)
        for pump in pumps:
            pump.drained.wait(5)
        send_figures(channel, limits)
        send_files(channel, before, limits)
        channel.send({"t": "done", "ok": not error, "error": error.strip().splitlines()[-1] if error else ""})


if __name__ == "__main__":
    main()
