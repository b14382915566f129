"""CPU and RSS of processes and of the whole machine, read straight from /proc (psutil is not a
dependency): what the benchmark measures its stack with."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# --- /proc ----------------------------------------------------------------------------------
def descendants(pid: int) -> list[int]:
    """The pid and every process below it (a prefork worker's children count as the worker)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                children = Path(f"/proc/{current}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            todo.extend(int(child) for child in children)
    return found


def cpu_seconds(pid: int, tree: bool = True) -> float:
    """utime + stime of the process (and, with `tree`, its descendants), in seconds."""
    total = 0
    for each in descendants(pid) if tree else [pid]:
        try:
            stat = Path(f"/proc/{each}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces; fields resume after its closing parenthesis.
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def rss_mb(pid: int, tree: bool = True) -> float:
    total_kb = 0
    for each in descendants(pid) if tree else [pid]:
        try:
            statm = Path(f"/proc/{each}/statm").read_text().split()
        except OSError:
            continue
        total_kb += int(statm[1]) * PAGE_KB
    return total_kb / 1024


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": sys.version.split()[0],
        "kernel": os.uname().release,
    }


def machine_busy_seconds() -> float:
    """CPU seconds spent busy by the whole machine, all cores (from /proc/stat)."""
    # user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user]
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / CLOCK_TICKS


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


@dataclass
class Meter:
    """CPU used and peak RSS of named processes between `start()` and `stop()`."""

    pids: dict[str, int]
    busy0: float = 0.0
    cpu0: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0
    result: dict[str, dict[str, float]] = field(default_factory=dict)

    @staticmethod
    def _tree(name: str) -> bool:
        # The bench process is the parent of everything else: only its own figures are its own.
        return name != "bench"

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_seconds()
        self.cpu0 = {name: cpu_seconds(pid, self._tree(name)) for name, pid in self.pids.items()}
        self.peak_rss = {name: rss_mb(pid, self._tree(name)) for name, pid in self.pids.items()}

    def sample(self) -> None:
        for name, pid in self.pids.items():
            self.peak_rss[name] = max(self.peak_rss.get(name, 0.0), rss_mb(pid, self._tree(name)))

    def stop(self) -> dict[str, dict[str, float]]:
        self.sample()
        wall = max(time.monotonic() - self.t0, 1e-9)
        used = {name: cpu_seconds(pid, self._tree(name)) - self.cpu0[name] for name, pid in self.pids.items()}
        self.result = {
            name: {
                "cpu_pct": round(100 * used[name] / wall, 1),
                "cpu_s": round(used[name], 3),
                "rss_mb": round(self.peak_rss[name], 1),
            }
            for name in self.pids
        }
        # The machine is shared: what everybody else used meanwhile says how much to trust a figure.
        busy = 100 * (machine_busy_seconds() - self.busy0) / wall
        ours = sum(r["cpu_pct"] for r in self.result.values())
        self.result["machine"] = {"busy_pct": round(busy, 1), "others_pct": round(max(busy - ours, 0.0), 1)}
        return self.result
