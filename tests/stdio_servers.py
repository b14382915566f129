"""How a test registers one of the suite's own stdio MCP servers: `forked(SCRIPT, *ARGS)`
gives the `command` and `args` of an MCPServer row (or of `register`).

The command runs the script through this test process's fork server (tests/forkserver.py, started
on first use, stopped with the process), which has the MCP SDK imported: a server starts in a few
milliseconds of CPU instead of 0.8 s. A test that looks at the server's process itself, or at
the command as typed, registers `sys.executable SCRIPT` as before."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FORKSERVER = HERE / "forkserver.py"
LAUNCHER = HERE / "forked.py"

_socket: str | None = None
_failed = False


def _forkserver() -> str | None:
    global _socket, _failed
    if _socket or _failed:
        return _socket
    path = os.path.join(tempfile.mkdtemp(prefix="tessera-fork-"), "socket")
    process = subprocess.Popen(
        [sys.executable, str(FORKSERVER), path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":  # it could not start: servers start as before
        process.kill()
        _failed = True
        return None
    atexit.register(process.kill)
    _socket = path
    return path


def forked(script: Path | str, *args: str) -> dict[str, Any]:
    """`command` and `args` that run `python SCRIPT ARGS...` as a fork of the fork server."""
    path = _forkserver()
    if path is None:
        return {"command": sys.executable, "args": [str(script), *args]}
    return {"command": sys.executable, "args": ["-S", str(LAUNCHER), path, str(script), *args]}


def command_for(script: Path | str, *args: str) -> list[str]:
    """The same as a command line, for a server a test starts itself (over HTTP, say)."""
    spec = forked(script, *args)
    return [spec["command"], *spec["args"]]
