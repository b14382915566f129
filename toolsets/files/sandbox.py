"""Runs `extract` in a child process with a wall-clock timeout, a CPU limit and a memory cap: a
zip bomb, a PDF built to take hours or an image that decodes to gigabytes fails that one file
with a clear error, and the worker that asked carries on."""

from __future__ import annotations

import base64
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path

from core.documents.extract import Extracted, ExtractError, Limits

ROOT = Path(__file__).resolve().parents[2]
MEMORY_MB = 1024
# Room for the thumbnail and the JSON around the text.
OUTPUT_SLACK = 4 * 1024 * 1024


def output_limit(limits: Limits) -> int:
    """The most a well-behaved child writes: its text as ASCII-only JSON (six bytes a character
    at worst), plus the slack. A child past it is stopped: what a worker holds stays bounded."""
    return limits.max_chars * 6 + OUTPUT_SLACK


def run(data: bytes, family: str, name: str, limits: Limits, timeout_s: float) -> Extracted:
    command = [
        sys.executable,
        "-s",  # no user site-packages; `-m` from the project root finds the module
        "-m",
        "core.documents.extract",
        family,
        name[:200] or "file",
        str(limits.max_pages),
        str(limits.max_chars),
        str(MEMORY_MB),
        str(max(1, int(timeout_s))),
    ]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=_env()
    )
    threading.Thread(target=_feed, args=(process, data), name="extract-input", daemon=True).start()
    try:
        stdout = _read_bounded(process, output_limit(limits), time.monotonic() + timeout_s)
    except TimeoutError as exc:
        raise ExtractError(f"Reading this file took longer than {timeout_s:g} seconds, so it was stopped.") from exc
    except OverflowError as exc:
        raise ExtractError("Reading this file gave more text than Tessera keeps for one file.") from exc
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    try:
        out = json.loads(stdout or b"{}")
    except ValueError:
        out = {}
    if not isinstance(out, dict) or not out:
        if process.returncode < 0 or process.returncode > 128:  # killed: the CPU or memory limit
            raise ExtractError("Reading this file needed more time or memory than Tessera allows for one file.")
        raise ExtractError("This file could not be read.")
    if "error" in out:
        raise ExtractError(str(out["error"]))
    return Extracted(
        kind=str(out["kind"]),
        text=str(out["text"]),
        page_starts=[int(n) for n in out.get("page_starts") or [0]],
        facts=dict(out.get("facts") or {}),
        thumbnail=base64.b64decode(out["thumbnail"]) if out.get("thumbnail") else None,
    )


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    # In a thread: a child that stops reading (it died, or it is writing) must not block us.
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        process.stdin.close()
    except (BrokenPipeError, ValueError, OSError):
        pass


def _read_bounded(process: subprocess.Popen[bytes], limit: int, deadline: float) -> bytes:
    """The child's output up to its end, or OverflowError past `limit` bytes, or TimeoutError
    at the deadline."""
    assert process.stdout is not None
    out = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not selector.select(left):
                continue
            chunk = os.read(process.stdout.fileno(), 1024 * 1024)
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > limit:
                raise OverflowError


def _env() -> dict[str, str]:
    # Nothing of the worker's environment (its secrets included) is handed to the child.
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
