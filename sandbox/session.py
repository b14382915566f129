"""A chat's session: one kernel (sandbox/kernel.py) inside the jail, alive between calls, holding
the chat's variables, ended after SANDBOX_IDLE_S without a call, or when a call breaks a limit
that kills it (wall time, CPU time, a crash).

The worker reads the kernel's messages with a deadline and a byte bound of its own: nothing it
sends is trusted to be short, well formed or on time.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cgroup, jail, seccomp
from .netproxy import NetProxy

log = logging.getLogger(__name__)
START_TIMEOUT_S = 30.0
# A line past this is not the kernel's: the session is ended.
LINE_SLACK = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n"

Event = dict[str, Any]


class Ended(Exception):
    """The session's process is gone; the message says why, for the user."""


@dataclass
class Outcome:
    ok: bool = False
    error: str = ""
    figures: list[str] = field(default_factory=list)  # base64 PNGs
    files: list[tuple[str, bytes]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    # Set when the call ended the session: why (the code's variables are gone).
    ended: str = ""


class Session:
    def __init__(
        self,
        chat_id: int,
        data_dir: Path,
        limits: jail.Limits,
        rules: list[tuple[str, tuple[int, ...]]] | None = None,
        **proxy_options: Any,
    ) -> None:
        """`rules`: the hosts its code may reach (default: the admin's list; none: no proxy and
        no way out at all). `proxy_options`: the proxy's resolver and address check (tests)."""
        self.chat_id = chat_id
        self.limits = limits
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.calls = 0
        self._stderr = bytearray()
        rules = jail.network_rules() if rules is None else rules
        self.proxy: NetProxy | None = None
        net_dir = None
        if rules:
            net_dir = Path(tempfile.mkdtemp(prefix=f"{chat_id}-", dir=jail.net_root()))
            net_dir.chmod(0o755)
            self.proxy = NetProxy(net_dir / "net.sock", rules, **proxy_options)
        # The whole session's memory and processes, where the worker is given cgroups.
        parent = cgroup.root()
        self.group: Path | None = None
        if parent is not None:
            self.group = cgroup.create(parent, f"{chat_id}-{os.urandom(4).hex()}", limits)
        filter_fd = seccomp.filter_fd()
        command = jail.command(data_dir, limits, filter_fd, net_dir)
        if self.group is not None:
            command = [*cgroup.WRAPPER, shutil.which(command[0]) or command[0], *command[1:]]
        ids = jail.host_ids(chat_id)
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={},
                user=ids[0] if ids else None,
                group=ids[1] if ids else None,
                extra_groups=[] if ids else None,
                process_group=0,
                pass_fds=(filter_fd,) if filter_fd is not None else (),
            )
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
        if self.group is not None:
            # In its cgroup before it becomes bubblewrap: all inside starts there.
            try:
                cgroup.enter(self.group, self.process.pid)
                assert self.process.stdin is not None
                self.process.stdin.write(b"\n")
                self.process.stdin.flush()
            except OSError as exc:
                log.error("Sandbox of chat %s could not enter its cgroup: %s", chat_id, exc)
                self.close()
                raise Ended("The sandbox could not be given its memory limit.") from exc
        threading.Thread(target=self._keep_stderr, daemon=True, name=f"sandbox-stderr-{chat_id}").start()
        self._buffer = b""
        try:
            ready = self._next(time.monotonic() + START_TIMEOUT_S, LINE_SLACK)
        except Ended:
            self.close()
            raise
        if ready.get("t") != "ready":
            self.close()
            raise Ended("The sandbox did not start.")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _keep_stderr(self) -> None:
        # What bubblewrap or the interpreter say before the kernel takes over: kept for the log.
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if len(self._stderr) < 4096:
                self._stderr += line[:4096]

    def run(self, code: str, on_output: Callable[[str, str], None], cancelled: Callable[[], bool]) -> Outcome:
        """Runs one call. `on_output(stream, text)` gets its output as it comes; the call is
        stopped (and the session with it) at the wall limit or when `cancelled()` says so."""
        self.calls += 1
        outcome = Outcome()
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps({"code": code}) + "\n").encode())
            self.process.stdin.flush()
        except OSError:
            self.close()
            outcome.ended = self._why_dead()
            return outcome
        deadline = time.monotonic() + self.limits.wall_s
        # What a well-behaved call sends at most: its output (JSON-escaped, 6 bytes a character
        # at worst), files, figures, and room for the messages around them.
        budget = (
            self.limits.output_chars * 6
            + (self.limits.files_mb * 1024 * 1024 * 4) // 3
            + self.limits.max_figures * ((self.limits.figure_kb * 1024 * 4) // 3)
            + LINE_SLACK
        )
        room = self.limits.files_mb * 1024 * 1024
        try:
            while True:
                message = self._next(deadline, budget, cancelled)
                budget -= len(json.dumps(message))
                kind = message.get("t")
                if kind == "out" and isinstance(message.get("d"), str):
                    on_output("stderr" if message.get("s") == "stderr" else "stdout", message["d"])
                elif kind == "figure" and len(outcome.figures) < self.limits.max_figures:
                    data = _b64(message.get("d"))
                    if data.startswith(PNG) and len(data) <= self.limits.figure_kb * 1024:
                        outcome.figures.append(base64.b64encode(data).decode())
                elif kind == "file" and len(outcome.files) < self.limits.max_files:
                    data = _b64(message.get("d"))
                    if len(data) <= room:
                        room -= len(data)
                        outcome.files.append((str(message.get("name", "file"))[:300], data))
                elif kind == "skipped":
                    outcome.skipped.append({"name": str(message.get("name"))[:300], "size": message.get("size")})
                elif kind == "done":
                    outcome.ok = bool(message.get("ok"))
                    outcome.error = str(message.get("error") or "")[:2000]
                    break
        except Ended as exc:
            self.close()
            outcome.ended = str(exc)
        self.last_used = time.monotonic()
        return outcome

    def _next(self, deadline: float, budget: int, cancelled: Callable[[], bool] | None = None) -> Event:
        """The kernel's next message, or Ended (with the reason) when it dies, runs past the
        deadline, sends more than `budget` bytes or is cancelled."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                if len(self._buffer) > budget:
                    raise Ended("The code sent more output than a call may; the session was restarted.")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Ended(
                        f"The code ran longer than {self.limits.wall_s} seconds and was stopped; "
                        "the session was restarted."
                    )
                if cancelled is not None and cancelled():
                    raise Ended("Stopped; the session was restarted.")
                if not selector.select(min(left, 0.25)):
                    continue
                chunk = os.read(fd, 1024 * 1024)
                if not chunk:
                    raise Ended(self._why_dead())
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def _why_dead(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "The session stopped answering and was restarted."
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return f"The code used more than {self.limits.cpu_s} seconds of CPU time; the session was restarted."
        if code in (-signal.SIGKILL, 128 + signal.SIGKILL):
            return "The session was killed (out of memory?) and was restarted."
        detail = bytes(self._stderr).decode("utf-8", "replace").strip()
        if detail:
            log.warning("Sandbox of chat %s ended (%s): %s", self.chat_id, code, detail[-500:])
        return f"The session ended (exit code {code}); it was restarted."

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
            shutil.rmtree(self.proxy.path.parent, ignore_errors=True)
        if self.process.poll() is None:
            # bubblewrap dies, and with it (--die-with-parent, a pid namespace) all inside.
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("Sandbox of chat %s did not exit", self.chat_id)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.group is not None:
            cgroup.remove(self.group)


def _b64(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""
