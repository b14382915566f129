"""Profiles of the stack's processes while a scenario runs (py-spy is not available here).

Two tools, chosen with `python -m bench.run --profile perf|cprofile`:

- `perf` (Linux perf, from outside the process, so no GIL bias): the processes start with
  PYTHONPERFSUPPORT=1, which makes Python 3.12 publish a symbol per Python function, and
  `perf record --call-graph dwarf` samples every thread on CPU. Perf cannot unwind through
  3.12's trampolines, so each sample is charged to its innermost Python function (with any C
  code it called, e.g. json or pydantic-core) — which is what "where the CPU goes" needs.
- `cprofile` (`python -m bench.profiler --out PREFIX -- -m module …` wraps the process): a
  deterministic profile with call trees. Python 3.12's cProfile sees every thread (it runs on
  sys.monitoring); slower code paths are over-weighted by its overhead, read it for structure.
  Control without signals (Celery and Twisted own them): the bench writes `reset` or
  `dump NAME` into `PREFIX.ctl`.

Reports: `profile-<process>-<scenario>.txt` in bench/results/.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pstats
import re
import runpy
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PERF_FREQUENCY = 199
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.+?)\s+\((.*)\)$")
PY_SYMBOL = re.compile(r"^py::(.+?):(.+?)(?:\+0x[0-9a-f]+)?$")


# --- perf, driven from the bench process ---------------------------------------------------------
def perf_available() -> bool:
    if shutil.which("perf") is None:
        return False
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text()) <= 2
    except (OSError, ValueError):
        return False


class PerfRecorder:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.running: list[tuple[subprocess.Popen[bytes], Path, str]] = []
        self.recorded: list[tuple[Path, str]] = []

    def start(self, label: str, pids: dict[str, int]) -> None:
        for name, pid in pids.items():
            data = self.out_dir / f"perf-{name}-{label}.data"
            command = ["perf", "record", "-q", "-F", str(PERF_FREQUENCY), "--call-graph", "dwarf,16384"]
            process = subprocess.Popen(
                [*command, "-p", str(pid), "-o", str(data)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.running.append((process, data, f"{name}-{label}"))

    def stop(self) -> None:
        for process, data, name in self.running:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
            self.recorded.append((data, name))
        self.running = []

    def report(self) -> list[Path]:
        """Turns every recording into a text report (slow: perf unwinds each sample now)."""
        written = []
        for data, name in self.recorded:
            if not data.exists():
                continue
            script = subprocess.run(
                ["perf", "script", "-i", str(data), "-F", "tid,ip,sym,dso"], capture_output=True, text=True
            )
            out = self.out_dir / f"profile-{name}.txt"
            out.write_text(summarize_perf(script.stdout, name))
            data.unlink(missing_ok=True)
            written.append(out)
        return written


def _package(path: str) -> str:
    """`…/site-packages/litellm/x.py` → litellm; Tessera's own files → chat, toolsets…"""
    parts = Path(path).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    root = str(Path(__file__).resolve().parent.parent)
    if path.startswith(root + "/"):
        return "tessera:" + Path(path).relative_to(root).parts[0].removesuffix(".py")
    if "/lib/python3" in path:
        return "stdlib:" + ("asyncio" if "asyncio" in parts else Path(path).stem)
    return path


def summarize_perf(script: str, name: str) -> str:
    own: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    native: collections.Counter[str] = collections.Counter()
    total = 0
    for sample in script.split("\n\n"):
        frames = [m.group(1) for line in sample.splitlines() if (m := FRAME.match(line))]
        if not frames:
            continue
        total += 1
        # The innermost Python function is charged, with the C code it called.
        py = next((PY_SYMBOL.match(f) for f in frames if f.startswith("py::")), None)
        if py:
            function, path = py.group(1), py.group(2)
            own[f"{function} ({_package(path)}:{Path(path).name})"] += 1
            packages[_package(path)] += 1
        else:
            packages["(no Python frame: interpreter start-up, GC, kernel…)"] += 1
        native[frames[0].split("+0x")[0]] += 1
    if not total:
        return f"{name}: no samples\n"
    seconds = total / PERF_FREQUENCY
    lines = [
        f"{name}: {total} samples at {PERF_FREQUENCY} Hz = {seconds:.1f} s of CPU (perf, all threads)",
        "",
        "CPU by package of the innermost Python function:",
        *(f"  {100 * n / total:5.1f}%  {pkg}" for pkg, n in packages.most_common(30)),
        "",
        "CPU by innermost Python function (with the C code it calls):",
        *(f"  {100 * n / total:5.1f}%  {label}" for label, n in own.most_common(60)),
        "",
        "CPU by innermost native symbol:",
        *(f"  {100 * n / total:5.1f}%  {label}" for label, n in native.most_common(25)),
    ]
    return "\n".join(lines) + "\n"


# --- cProfile, inside the profiled process -------------------------------------------------------
class Deterministic:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.control = Path(prefix + ".ctl")
        self.profiler = cProfile.Profile()
        self.lock = threading.Lock()

    def start(self) -> None:
        self.profiler.enable()
        threading.Thread(target=self._watch, name="bench-profiler", daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(0.2)
            try:
                command = self.control.read_text().split()
            except OSError:
                continue
            self.control.unlink(missing_ok=True)
            with self.lock:
                if command[:1] == ["reset"]:
                    self.profiler.disable()
                    self.profiler = cProfile.Profile()
                    self.profiler.enable()
                elif command[:1] == ["dump"]:
                    self.dump(command[1] if len(command) > 1 else "dump")

    def dump(self, name: str) -> None:
        self.profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(self.profiler, stream=out)
        stats.sort_stats("tottime").print_stats(45)
        out.write("\n=== by cumulative time ===\n")
        stats.sort_stats("cumulative").print_stats(80)
        Path(f"{self.prefix}-{name}.txt").write_text(out.getvalue())
        stats.dump_stats(f"{self.prefix}-{name}.pstats")
        self.profiler.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description="Run a module under cProfile, controlled by a file.")
    parser.add_argument("--out", required=True, help="prefix of the report files")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- -m module args…")
    args = parser.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if rest[:1] != ["-m"] or len(rest) < 2:
        raise SystemExit("usage: python -m bench.profiler --out PREFIX -- -m module [args…]")
    Deterministic(args.out).start()
    sys.argv = [rest[1], *rest[2:]]
    os.environ["BENCH_PROFILED"] = "1"
    runpy.run_module(rest[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
