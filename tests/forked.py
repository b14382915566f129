"""`python -S forked.py SOCKET SCRIPT [ARG...]`: run one of the suite's stdio MCP servers as a
copy of the fork server at SOCKET (tests/forkserver.py), which has the SDK imported already.

This process stays what the client started: it hands over its stdin, stdout and stderr, then
waits and exits with the server's status; stopped, it stops the server and waits for it (killed,
it takes the server with it: the fork server sees its socket close). With no fork server
listening, it runs the script itself. Standard library only, for a fast start under `-S`.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import sys


def main() -> None:
    path, *argv = sys.argv[1:]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        os.execv(sys.executable, [sys.executable, *argv])
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    fds = array.array("i", [0, 1, 2])
    connection.sendmsg([len(request).to_bytes(4, "big") + request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    # The server holds the pipes now: this process keeps none of the client's ends open, so the
    # client sees the server's end of stdout when the server ends it.
    # Stopped (SIGTERM, as the client or a test stops a server): the server is stopped and waited
    # for, so whoever waits for this process knows the server's port and pipes are free.
    signal.signal(signal.SIGTERM, lambda *_: connection.shutdown(socket.SHUT_WR))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    status = b""
    while chunk := connection.recv(16):
        status += chunk
    os._exit(int(status) if status.strip().isdigit() else 1)


if __name__ == "__main__":
    main()
