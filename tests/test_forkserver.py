"""The suite's fork server for its own stdio MCP servers (tests/forkserver.py, tests/forked.py):
a server run through it sees what `python SCRIPT ARGS` would give it, and stopping the launcher
stops the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.stdio_servers import command_for

SCRIPT = """
import json, os, sys, time
line = sys.stdin.readline()
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("PROBE"), "line": line.strip(),
                  "pid": os.getpid(), "main": __name__}), flush=True)
if sys.argv[1] == "wait":
    time.sleep(60)
sys.exit(int(sys.argv[2]))
"""


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    return script


def test_a_forked_server_gets_its_arguments_pipes_environment_and_exit_status(tmp_path: Path) -> None:
    script = _script(tmp_path)
    command = command_for(script, "exit", "7")
    assert "-S" in command  # through the fork server, not a plain run
    done = subprocess.run(
        command, input="hello\n", capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PROBE": "x"}
    )

    seen = json.loads(done.stdout)
    assert seen["argv"] == [str(script), "exit", "7"]
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == "x"
    assert seen["line"] == "hello"
    assert seen["main"] == "__main__"
    assert done.returncode == 7


def _waiting_server(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """A launcher whose server has started and waits; and the server's own pid."""
    process = subprocess.Popen(
        command_for(_script(tmp_path), "wait", "0"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    return process, int(json.loads(process.stdout.readline())["pid"])


def test_stopping_the_launcher_stops_the_server_first(tmp_path: Path) -> None:
    process, server = _waiting_server(tmp_path)
    assert server != process.pid
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == 128 + signal.SIGTERM
    # Waited for: the server is gone once the launcher has exited.
    assert not Path(f"/proc/{server}").exists()


def test_killing_the_launcher_takes_the_server_with_it(tmp_path: Path) -> None:
    process, server = _waiting_server(tmp_path)
    process.kill()
    process.wait(10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{server}").exists()
