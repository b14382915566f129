"""A memory and process cap that holds for a session as a whole: a cgroup v2 of its own.

The kernel's resource limits (sandbox/kernel.py) bound each process — RLIMIT_AS its address space,
RLIMIT_NPROC the processes — so a session's processes together could use up to `processes` ×
`memory_mb`. Where the worker is given a cgroup v2 subtree (TESSERA_SANDBOX_CGROUP: a directory of
the cgroup2 file system the worker may write, holding no process itself — systemd's
`Delegate=yes`, or a container's own cgroup namespace), each session gets a child cgroup with
`memory.max` = the memory limit (swap 0; the whole session is killed together on OOM) and
`pids.max` = the process limit. The worker moves the session's first process in before it
starts bubblewrap (the wrapper waits for a line on its stdin), so everything inside starts there.
The sandbox's own user never needs write access to any cgroup file.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from django.conf import settings

from .jail import Limits

log = logging.getLogger(__name__)
# Waits for the worker's go-ahead (a line), then becomes bubblewrap, already in its cgroup.
WRAPPER = ("/bin/sh", "-c", 'read _ && exec "$@"', "sandbox")


def root() -> Path | None:
    """The delegated cgroup v2 directory sessions are made under, or None (rlimits only)."""
    configured = str(getattr(settings, "SANDBOX_CGROUP", "") or "")
    if not configured:
        return None
    path = Path(configured)
    try:
        controllers = (path / "cgroup.controllers").read_text().split()
    except OSError as exc:
        raise OSError(f"TESSERA_SANDBOX_CGROUP {path} is not a cgroup v2 directory: {exc}") from exc
    if "memory" not in controllers or "pids" not in controllers:
        raise OSError(f"TESSERA_SANDBOX_CGROUP {path} lacks the memory or pids controller: {controllers}")
    return path


def create(parent: Path, name: str, limits: Limits) -> Path:
    """A session's cgroup with its caps (the parent's controllers switched on for children)."""
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    missing = [c for c in ("memory", "pids") if c not in enabled]
    if missing:
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
    group = parent / name
    group.mkdir(exist_ok=True)
    writes = {
        "memory.max": str(limits.memory_mb * 1024 * 1024),
        "memory.swap.max": "0",
        "memory.oom.group": "1",
        "pids.max": str(limits.processes + 4),  # bubblewrap and its init besides the code's
    }
    for name_, value in writes.items():
        try:
            (group / name_).write_text(value)
        except FileNotFoundError:
            # memory.swap.max is absent where swap accounting is off: no swap to cap.
            if name_ != "memory.swap.max":
                raise
    return group


def enter(group: Path, pid: int) -> None:
    (group / "cgroup.procs").write_text(str(pid))


def remove(group: Path) -> None:
    """The session's cgroup, once its processes are gone (a real cgroup directory is removed
    with rmdir, its files being the kernel's)."""
    try:
        os.rmdir(group)
    except OSError:
        shutil.rmtree(group, ignore_errors=True)
        if group.exists():
            log.warning("Sandbox cgroup %s could not be removed", group)
