"""The sandbox's boundary: the bubblewrap command a session's kernel runs under, and its limits.

Inside, the code sees a root of its own: the system's /usr read-only (no /etc, no /home, no
/var, no project folder), the sandbox's Python read-only, the chat's files read-only at /data, a
size-bounded tmpfs at /output (its working folder) and /tmp, its own /proc and a minimal /dev.
It runs in new user, pid, network, IPC, UTS, mount and cgroup namespaces (the network one empty:
no interface but its own loopback; the one way out, when an admin allows hosts, is the session's
proxy socket at /run/tessera, sandbox/netproxy.py), as an unprivileged user, with no capabilities, a
cleared environment and, where libseccomp is there, a seccomp filter (sandbox.seccomp). The
kernel lowers its resource limits before any code runs (sandbox/kernel.py).

On the host the process runs as a user id of its chat's own when the worker is root (so one
chat's process count is its own, and nothing of another chat's is its), else as the worker's.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from django.conf import settings

KERNEL = Path(__file__).resolve().with_name("kernel.py")
BWRAP = "bwrap"
INSIDE_UID = 1000
# Host user ids of sandboxes: one per chat (modulo the span), far from any real account's.
HOST_UID_BASE = 3_000_000
HOST_UID_SPAN = 1_000_000


@dataclass(frozen=True)
class Limits:
    """What one session may use. CPU and output are per call; the rest hold for the session."""

    cpu_s: int = 30
    wall_s: int = 60
    session_cpu_s: int = 600
    memory_mb: int = 2048
    processes: int = 32
    open_files: int = 256
    disk_mb: int = 200
    output_chars: int = 200_000
    max_files: int = 20
    files_mb: int = 20
    max_figures: int = 10
    figure_kb: int = 1024

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def network_rules() -> list[tuple[str, tuple[int, ...]]]:
    """The hosts code may reach through the session's proxy (sandbox/netproxy.py): none unless
    an admin lists some (TESSERA_SANDBOX_ALLOWED_HOSTS, checked when settings load)."""
    from .netproxy import parse_rule

    return [parse_rule(rule) for rule in getattr(settings, "SANDBOX_ALLOWED_HOSTS", [])]


def net_root() -> Path:
    """Where sessions' proxy sockets are made: a short path (a socket's is at most 107 bytes)."""
    root = Path(settings.SANDBOX_DIR) / "net"
    root.mkdir(parents=True, exist_ok=True)
    return root


def limits() -> Limits:
    configured = dict(getattr(settings, "SANDBOX_LIMITS", {}))
    return Limits(**{k: int(v) for k, v in configured.items() if k in Limits.__dataclass_fields__})


def python_dir() -> Path:
    """The sandbox's own venv (numpy, pandas, matplotlib: sandbox/requirements.txt)."""
    return Path(settings.SANDBOX_PYTHON)


def _base_prefix(venv: Path) -> Path | None:
    """The installation the venv's interpreter comes from (its pyvenv.cfg `home`, /usr/bin for
    Debian's python3)."""
    try:
        lines = (venv / "pyvenv.cfg").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return Path(value.strip()).parent
    return None


def missing() -> str:
    """What this machine lacks to run sandboxes, for people; "" when nothing."""
    if shutil.which(BWRAP) is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap)."
    venv = python_dir()
    if not (venv / "bin" / "python").exists() or _base_prefix(venv) is None:
        return f"The sandbox's Python is not installed at {venv} (make sandbox)."
    return ""


def host_ids(chat_id: int) -> tuple[int, int] | None:
    """The host (uid, gid) a chat's sandbox runs as; None: the worker's own (not root)."""
    if os.geteuid() != 0:
        return None
    uid = HOST_UID_BASE + chat_id % HOST_UID_SPAN
    return uid, uid


def command(data_dir: Path, limits: Limits, seccomp_fd: int | None = None, net_dir: Path | None = None) -> list[str]:
    venv = python_dir()
    base = _base_prefix(venv)
    assert base is not None, "checked by missing()"
    args = [
        BWRAP,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--uid",
        str(INSIDE_UID),
        "--gid",
        str(INSIDE_UID),
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
        *("--symlink", "usr/lib", "/lib"),
        *("--symlink", "usr/lib64", "/lib64"),
        *("--symlink", "usr/bin", "/bin"),
        *("--symlink", "usr/sbin", "/sbin"),
        *("--proc", "/proc", "--dev", "/dev"),
        # Fonts' configuration (public), which matplotlib's text rendering asks for.
        *("--ro-bind-try", "/etc/fonts", "/etc/fonts"),
        *("--size", str(limits.disk_mb * 1024 * 1024), "--tmpfs", "/output"),
        *("--size", str(64 * 1024 * 1024), "--tmpfs", "/tmp"),
        *("--ro-bind", str(venv), "/opt/python"),
        *("--ro-bind", str(KERNEL), "/opt/kernel.py"),
        *("--ro-bind", str(data_dir), "/data"),
        *("--chdir", "/output"),
        *("--setenv", "PATH", "/opt/python/bin:/usr/bin:/bin"),
        *("--setenv", "HOME", "/tmp"),
        *("--setenv", "LANG", "C.UTF-8"),
        *("--setenv", "MPLBACKEND", "Agg"),
        *("--setenv", "MPLCONFIGDIR", "/tmp/matplotlib"),
        # One thread for the maths libraries: their thread pools count against the processes.
        *("--setenv", "OPENBLAS_NUM_THREADS", "1"),
        *("--setenv", "OMP_NUM_THREADS", "1"),
        *("--setenv", "PYTHONDONTWRITEBYTECODE", "1"),
    ]
    if not base.is_relative_to("/usr"):
        # An interpreter outside /usr (a pyenv build) is bound at its own path, where the venv
        # looks for it. It must be readable by the sandbox's user: Debian's python3 always is.
        args += ["--ro-bind", str(base), str(base)]
    if net_dir is not None:
        # The proxy's socket: the only way out of the empty network namespace (sandbox/netproxy.py).
        args += ["--ro-bind", str(net_dir), "/run/tessera"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, "--", "/opt/python/bin/python", "-I", "/opt/kernel.py", _json(limits, network=net_dir is not None)]


def _json(limits: Limits, *, network: bool) -> str:
    import json

    return json.dumps({**limits.as_dict(), "network": int(network)})
