"""What a turn costs the worker besides its tokens: claim, transcript, toolsets, the started and
finished fragments, the final writes.

    python -m bench.turncost [--turns 40] [--tokens 5] [--tps 1000] [--profile out.pstats] [--path fast|litellm]

Runs the worker's own code (`chat.worker.turns.run_turn_sync`, the process's worker loop) in this
process, one turn after another, against the fake provider with answers of a few tokens, on a
fresh SQLite database and an embedded Redis. Prints the CPU (`time.process_time`, every thread)
per turn and the queries per turn; `--profile` writes a cProfile of the measured turns.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import cProfile
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _provider() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.fake_provider"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    return process, f"http://127.0.0.1:{line.split()[1]}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--tokens", type=int, default=5)
    parser.add_argument("--tps", type=float, default=1000, help="tokens per second of each answer")
    parser.add_argument("--concurrent", type=int, default=1, help="turns run at once, each in its own chat")
    parser.add_argument(
        "--fresh", action="store_true", help="each turn in a new chat (as the benchmark's ramp), not one growing chat"
    )
    parser.add_argument("--path", choices=["fast", "litellm"], default="fast")
    parser.add_argument("--profile", help="write a cProfile of the measured turns here")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="tessera-turncost-"))
    from core import embedded_redis

    redis_process = embedded_redis.start(work / "redis.sock")
    provider, api_base = _provider()
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
            "REDIS_URL": f"unix://{work / 'redis.sock'}",
            "TESSERA_VAR_DIR": str(work / "var"),
            "TESSERA_FAST_PATH": "true" if args.path == "fast" else "false",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    try:
        print(json.dumps(_run(args, api_base)))
    finally:
        provider.terminate()
        if redis_process is not None:
            redis_process.terminate()


def _run(args: argparse.Namespace, api_base: str) -> dict[str, float]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from chat import branches
    from chat.exchanges import start_turn
    from chat.models import Chat, LLMModel, Turn
    from chat.selection import default_selection
    from chat.worker import loop as worker_loop
    from chat.worker.turns import run_turn_sync

    call_command("migrate", interactive=False, verbosity=0)
    user = get_user_model().objects.create_user("turncost", password="x")
    model = LLMModel.objects.create(name="Bench", model="openai/bench", api_base=api_base, api_key="x", is_default=True)
    chats = [
        Chat.objects.create(owner=user, model=model, enabled_tools=dict(default_selection()))
        for _ in range(args.concurrent)
    ]

    def queue_turn(tag: int, chat: Chat = chats[0]) -> int:
        from unittest import mock

        directive = f"[bench tag={tag} n={args.tokens} tps={args.tps:g} ttft=0 para=50 tools=0]"
        # The task is run here, not queued: the publish is the web's cost, not the worker's.
        with mock.patch("chat.tasks.run_turn.apply_async"), transaction.atomic():
            _, turn = start_turn(chat, directive, parent=branches.last_turn(chat))
        return turn.pk

    for tag in range(3):  # warm-up: imports, LiteLLM's caches, connection pools
        run_turn_sync(queue_turn(tag))
    rounds = -(-args.turns // args.concurrent)
    profile = cProfile.Profile() if args.profile else None
    ids: list[int] = []
    pool = concurrent.futures.ThreadPoolExecutor(args.concurrent)  # as Celery's pool threads
    started = time.process_time()
    wall = time.perf_counter()
    for round_ in range(rounds):
        # Queued before the clock's share of this round would count them: the web's cost.
        cpu_before_queue = time.process_time()
        if args.fresh:
            chats = [
                Chat.objects.create(owner=user, model=model, enabled_tools=dict(default_selection()))
                for _ in range(args.concurrent)
            ]
        batch = [queue_turn(100 + round_ * args.concurrent + i, chat) for i, chat in enumerate(chats)]
        started += time.process_time() - cpu_before_queue
        ids.extend(batch)
        if profile:
            profile.enable()
        list(pool.map(run_turn_sync, batch))
        if profile:
            profile.disable()
    cpu = time.process_time() - started
    wall = time.perf_counter() - wall
    done = Turn.objects.filter(pk__in=ids, status=Turn.Status.COMPLETED).count()
    queries = _queries_per_turn(queue_turn, run_turn_sync)
    worker_loop.shutdown()
    if profile and args.profile:
        profile.dump_stats(args.profile)
    turns = len(ids)
    return {
        "turns": turns,
        "concurrent": args.concurrent,
        "completed": done,
        "tokens": args.tokens,
        "cpu_ms_per_turn": round(1000 * cpu / turns, 2),
        "cpu_us_per_token": round(1e6 * cpu / (turns * args.tokens), 1),
        "wall_ms_per_turn": round(1000 * wall / turns, 2),
        "queries_per_turn": queries,
    }


def _queries_per_turn(queue_turn: Any, run: Any) -> int:
    """The statements of one turn on every thread: the worker's writes run on the loop's thread
    pool, whose connections were opened before (a per-connection capture would miss them). The
    MCP servers' snapshot is read beforehand: its re-read every few seconds is not a turn's."""
    from django.db.backends.utils import CursorWrapper

    from toolsets.mcp import catalog

    seen: list[str] = []
    original = getattr(CursorWrapper, "_execute")  # noqa: B009 - private, not in the type stubs

    def counting(self: Any, sql: str, *args: Any) -> Any:
        seen.append(sql)
        return original(self, sql, *args)

    turn_id = queue_turn(999)
    catalog.toolsets()
    ttl, catalog.SNAPSHOT_TTL_S = catalog.SNAPSHOT_TTL_S, 3600.0
    setattr(CursorWrapper, "_execute", counting)  # noqa: B010
    try:
        run(turn_id)
    finally:
        setattr(CursorWrapper, "_execute", original)  # noqa: B010
        catalog.SNAPSHOT_TTL_S = ttl
    if os.environ.get("TURNCOST_SQL"):
        print("\n".join(sql[:160] for sql in seen), file=sys.stderr)
    return len(seen)


if __name__ == "__main__":
    main()
