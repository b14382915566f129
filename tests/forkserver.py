"""A fork server for the suite's own stdio MCP servers: `python forkserver.py SOCKET`.

Every stdio server a test registers is a new Python process, and each spent about 0.8 s of CPU
importing the MCP SDK (its pydantic models) before it read a byte: some 280 of them in a run of
the suite, a tenth of its CPU. This process imports the SDK once and forks a copy of itself for
each server (tests/forked.py is the command a test registers; it hands its stdin, stdout and
stderr over this socket and waits for the exit status).

What a test sees is what it saw before: the server runs its script as `__main__` with the
launcher's arguments, environment and working directory, on the pipes the client made; the
exit status comes back to the client; stopping the launcher (the SDK stops the process group)
stops the server. The third-party servers are started as they always are.
"""

from __future__ import annotations

import array
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback
from typing import Any

# What the test servers import (tests/toolsets/mcp/*_server.py and the others): the reason this
# process exists. Anything else a server imports is imported by the copy, as a plain run would.
import anyio  # noqa: F401
import mcp.server.mcpserver
import mcp.server.stdio  # noqa: F401
import mcp_types  # noqa: F401

STOP_GRACE_S = 2.0


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The launcher's request (length-prefixed JSON) and its three standard descriptors."""
    fds = array.array("i")
    data, ancillary, _flags, _address = connection.recvmsg(1 << 16, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    size = int.from_bytes(data[:4], "big")
    while len(data) < 4 + size:
        chunk = connection.recv(1 << 16)
        if not chunk:
            raise EOFError("the launcher left before its request was complete")
        data += chunk
    return json.loads(data[4 : 4 + size]), list(fds)


def _run(request: dict[str, Any], fds: list[int]) -> None:
    """In the server's own process: become `python SCRIPT ARGS...` and never return."""
    code = 1
    try:
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(str(request["cwd"]))
        argv = [str(a) for a in request["argv"]]
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        try:
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _supervise(connection: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In a copy per server: start it, then wait for whichever ends first, the server (its exit
    status goes to the launcher) or the launcher (stopped by the client: the server is stopped)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        connection.close()
        _run(request, fds)
    for fd in fds:
        os.close(fd)
    watcher = os.pidfd_open(pid)
    ready, _, _ = select.select([connection.fileno(), watcher], [], [])
    if watcher not in ready:  # the launcher is gone
        os.kill(pid, signal.SIGTERM)
        if not select.select([watcher], [], [], STOP_GRACE_S)[0]:  # readable once the server ends
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        connection.sendall(str(code if code >= 0 else 128 - code).encode())
    except OSError:
        pass
    os._exit(0)


def main(path: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the supervisors reap their own servers
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    parent = os.getppid()
    print("ready", flush=True)
    while True:
        # A test process that died without stopping this one leaves no server behind for long.
        if not select.select([listener], [], [], 5)[0]:
            if os.getppid() != parent:
                return
            continue
        connection, _ = listener.accept()
        try:
            request, fds = _receive(connection)
        except (OSError, ValueError, EOFError):
            connection.close()
            continue
        if os.fork() == 0:
            listener.close()
            _supervise(connection, request, fds)
        connection.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    main(sys.argv[1])
