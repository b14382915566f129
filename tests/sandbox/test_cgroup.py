"""A session's cgroup (sandbox/cgroup.py), where the worker is given one: made with the session's
memory, swap and process caps, its first process moved in before it becomes bubblewrap, removed
with the session. This machine's cgroups are v1, so the cgroup directory is a stand-in with the
same files; the kernel's side (that memory.max holds) is the kernel's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox import cgroup, jail
from sandbox.session import Session

LIMITS = jail.Limits(cpu_s=4, wall_s=10, memory_mb=512, processes=16, output_chars=10_000)


def _fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "cg"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    return root


def test_an_unusable_cgroup_setting_fails_loudly(tmp_path: Path, settings: Any) -> None:
    settings.SANDBOX_CGROUP = ""
    assert cgroup.root() is None
    settings.SANDBOX_CGROUP = str(tmp_path)
    with pytest.raises(OSError, match="not a cgroup v2"):
        cgroup.root()
    (tmp_path / "cgroup.controllers").write_text("cpu\n")
    with pytest.raises(OSError, match="lacks the memory"):
        cgroup.root()


@pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok")
def test_a_session_runs_in_its_own_capped_cgroup(tmp_path: Path, settings: Any) -> None:
    root = _fake_root(tmp_path)
    settings.SANDBOX_CGROUP = str(root)
    settings.SANDBOX_ALLOWED_HOSTS = []
    data = tmp_path / "data"
    data.mkdir()
    for folder in (data, *data.parents):
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o005)
    session = Session(3, data, LIMITS)
    try:
        group = session.group
        assert group is not None and group.parent == root
        assert (root / "cgroup.subtree_control").read_text() == "+memory +pids"
        assert (group / "memory.max").read_text() == str(512 * 1024 * 1024)
        assert (group / "memory.swap.max").read_text() == "0"
        assert (group / "memory.oom.group").read_text() == "1"
        assert (group / "pids.max").read_text() == "20"
        assert (group / "cgroup.procs").read_text() == str(session.process.pid)
        out: list[str] = []
        assert session.run("print(6 * 7)", lambda stream, text: out.append(text), lambda: False).ok
        assert "".join(out) == "42\n"
    finally:
        session.close()
    assert not group.exists()
