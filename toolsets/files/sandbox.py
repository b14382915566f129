"""Runs `extract` in a child process with a wall-clock timeout, a CPU limit and a memory cap: a
zip bomb, a PDF built to take hours or an image that decodes to gigabytes fails that one file
with a clear error, and the worker that asked carries on."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from .extract import Extracted, ExtractError, Limits

ROOT = Path(__file__).resolve().parents[2]
MEMORY_MB = 1024


def run(data: bytes, family: str, name: str, limits: Limits, timeout_s: float) -> Extracted:
    command = [
        sys.executable,
        "-s",  # no user site-packages; `-m` from the project root finds the module
        "-m",
        "toolsets.files.extract",
        family,
        name[:200] or "file",
        str(limits.max_pages),
        str(limits.max_chars),
        str(MEMORY_MB),
        str(max(1, int(timeout_s))),
    ]
    try:
        done = subprocess.run(
            command, input=data, capture_output=True, timeout=timeout_s, cwd=ROOT, check=False, env=_env()
        )
    except subprocess.TimeoutExpired as exc:
        raise ExtractError(f"Reading this file took longer than {timeout_s:g} seconds, so it was stopped.") from exc
    try:
        out = json.loads(done.stdout or b"{}")
    except ValueError:
        out = {}
    if not isinstance(out, dict) or not out:
        if done.returncode < 0 or done.returncode > 128:  # killed: the CPU or memory limit
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


def _env() -> dict[str, str]:
    # Nothing of the worker's environment (its secrets included) is handed to the child.
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
