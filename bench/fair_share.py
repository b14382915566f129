"""Fair share of the workers: another user's Send → first text while one user bursts slow
answers, more than the worker has threads.

The burster sends a `[demo:slow]` question in each of `burst` chats at once (a slow answer
streams for about ten seconds); the reader then sends a demo question every second and measures
its first text, first on a quiet stack (the baseline), then during the burst. Run twice: with no
caps (every turn goes to the workers at once, as before the fair share) and with the default
caps, where the burst waits in its own user's queue.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .client import BenchError, ChatSocket
from .fairness import _first_fragment

SLOW = "[demo:slow] Explain the history of the web in detail."


async def _one_run(bench: Any, burst: int, samples: int, user_cap: int) -> dict[str, Any]:
    from .figures import summary

    await asyncio.to_thread(bench.stack.django, "caps", "--user", str(user_cap), "--token", str(user_cap))
    burster, reader = bench.sessions[0], bench.sessions[1]
    demo = bench.stack.setup["demo_model"]
    chat = await reader.create_chat()
    await reader.set_model(chat, demo)
    socket = ChatSocket(reader, chat)
    await socket.open()
    chats = []
    for _ in range(burst):
        chats.append(await burster.create_chat())
        await burster.set_model(chats[-1], demo)
    try:
        baseline = [await _first_fragment(reader, socket, chat) for _ in range(3)]
        started = time.monotonic()
        await asyncio.gather(*(burster.send(c, SLOW) for c in chats))
        sent_s = time.monotonic() - started
        during = []
        for _ in range(samples):
            step = time.monotonic()
            during.append(await _first_fragment(reader, socket, chat))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - step)))
    finally:
        await socket.close()
        # The burst is stopped (queued answers are cancelled, running ones end).
        for c in chats:
            await burster.http.post(f"/chats/{c}/stop/", headers=burster._htmx())
        await asyncio.sleep(1.0)
    first_text = [s[2] for s in during if s[2] is not None]
    if not first_text:
        raise BenchError("no first text during the burst")
    return {
        "user_cap": user_cap or None,
        "burst_sent_s": round(sent_s, 2),
        "baseline_first_text_ms": summary([s[2] for s in baseline if s[2] is not None]),
        "during_first_text_ms": summary(first_text),
    }


async def run(bench: Any, burst: int, samples: int) -> dict[str, Any]:
    if len(bench.sessions) < 2:
        raise BenchError("the fair-share scenario needs two users")
    concurrency = bench.stack.config.concurrency
    figures: dict[str, Any] = {"burst": burst, "worker_threads": concurrency}
    figures["no_caps"] = await _one_run(bench, burst, samples, 0)
    figures["default_caps"] = await _one_run(bench, burst, samples, 4)
    # The rest of the benchmark measures the message path with many turns per user: no caps.
    await asyncio.to_thread(bench.stack.django, "caps", "--user", "0", "--token", "0")
    for label in ("no_caps", "default_caps"):
        during = figures[label]["during_first_text_ms"]
        print(
            f"  fair share ({label}): another user's first text p50 {during['p50']} ms, max {during['max']} ms "
            f"while one user burst {burst} slow answers on {concurrency} worker threads",
            flush=True,
        )
    return figures
