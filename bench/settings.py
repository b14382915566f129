"""Tessera's settings with the benchmark's instruments and experiments on top (never used
outside bench/). The channel layer is chosen the way production chooses it
(TESSERA_CHANNEL_LAYER), so `--layer` measures exactly what an operator would run."""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403

if os.environ.get("BENCH_GC_LOG"):
    # Garbage-collector pauses stop every thread of the process (the GIL is held throughout):
    # the bench reads this log to tell them apart from other latency spikes.
    import gc
    import time

    _gc_log = open(f"{os.environ['BENCH_GC_LOG']}-{os.getpid()}.log", "a", buffering=1)  # noqa: SIM115
    _gc_started = [0.0]

    def _gc_timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            _gc_started[0] = time.monotonic()
        else:
            pause = time.monotonic() - _gc_started[0]
            if pause >= 0.002:
                _gc_log.write(f"{time.monotonic():.4f} {info['generation']} {pause * 1000:.1f} {info['collected']}\n")

    gc.callbacks.append(_gc_timer)

if os.environ.get("BENCH_GC_FREEZE"):
    # Experiment: move everything alive once the worker has started (Django, Celery, LiteLLM
    # and their imports) out of the collector's reach, so a full collection only walks what
    # the turns allocate.
    from celery.signals import worker_ready

    @worker_ready.connect
    def _freeze_after_start(**_: object) -> None:
        import gc

        gc.collect()
        gc.freeze()


if os.environ.get("BENCH_LITELLM_HTTPX") and "celery" in " ".join(__import__("sys").argv):
    # Experiment (worker only): LiteLLM's httpx transport instead of its default aiohttp one,
    # whose per-event-loop sessions are left for the garbage collector to finalize.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.disable_aiohttp_transport = True

if os.environ.get("BENCH_TRACE"):
    # Timestamps per fragment in the worker and web processes (bench/trace.py).
    import sys

    _argv = " ".join(sys.argv)

    def _install_trace_hooks() -> None:
        from bench import trace

        if "celery" in _argv:
            trace.install_worker_hooks(os.environ["BENCH_TRACE"])
        elif "config/web.py" in _argv or "config.web" in _argv or "daphne" in _argv:
            trace.install_web_hooks(os.environ["BENCH_TRACE"])

    from django.apps import apps as _apps

    # Once the apps are loaded (chat.worker.streaming imports models), which happens while Celery and
    # Daphne start, well before the first fragment.
    if _apps.ready:
        _install_trace_hooks()
    else:
        import threading

        def _when_ready() -> None:
            import time

            while not _apps.ready:
                time.sleep(0.05)
            _install_trace_hooks()

        threading.Thread(target=_when_ready, daemon=True).start()

if os.environ.get("BENCH_ANYIO_THREADS"):
    # Experiment: how many threads LiteLLM's end-of-stream work (run through anyio) may use at
    # once in a worker's loop. Fewer threads compete with the loop thread for the GIL.
    from celery.signals import worker_ready

    @worker_ready.connect
    def _limit_anyio_threads(**_: object) -> None:
        async def limit() -> None:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = int(os.environ["BENCH_ANYIO_THREADS"])

        from chat.worker import loop as worker_loop

        worker_loop.get().run(limit())


if os.environ.get("BENCH_GC_THRESHOLD"):
    # Experiment: collector thresholds for the worker ("gen0,gen1,gen2").
    from celery.signals import worker_ready

    @worker_ready.connect
    def _gc_threshold(**_: object) -> None:
        import gc

        gc.set_threshold(*(int(x) for x in os.environ["BENCH_GC_THRESHOLD"].split(",")))
