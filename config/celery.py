import gc
import os
import sys
from typing import TYPE_CHECKING

from celery import Celery
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

if TYPE_CHECKING:
    from chat.worker.loop import WorkerLoop

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("tessera")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _redbeat_names(sender: Celery, **kwargs: object) -> None:
    """RedBeat (beat's scheduler) looks for its settings by their own names, not by Celery's
    namespace (where it finds the values but warns that it fell back to the broker's)."""
    from django.conf import settings

    sender.conf.update(
        redbeat_redis_url=settings.CELERY_REDBEAT_REDIS_URL,
        redbeat_redis_options={},
        redbeat_key_prefix=settings.CELERY_REDBEAT_KEY_PREFIX,
        redbeat_lock_key="lock",
        redbeat_lock_timeout=settings.CELERY_REDBEAT_LOCK_TIMEOUT,
    )


def runs_turns(app: Celery) -> bool:
    """Whether this worker may be handed turns: any worker but one that consumes only the files
    or sandbox queues (that one gets no turn loop, no reaper, no heartbeat telling /readyz a turn
    worker is there). A worker on a queue of its own (`-Q doomed` in the tests) runs turns sent
    there."""
    from django.conf import settings

    sandbox = settings.SANDBOX_QUEUE
    others = {q for q in app.amqp.queues.consume_from if q != settings.FILES_QUEUE}
    return bool({q for q in others if q != sandbox and not q.startswith(sandbox + ".")})


@worker_ready.connect
def _start_turn_loop(**_: object) -> None:
    """Starts the process's turn loop and warms LiteLLM up in it, before the first turn arrives."""
    from core import tracing

    # Traces, when an OTLP endpoint is configured (core/tracing.py).
    tracing.setup("worker" if runs_turns(app) else "background-worker")
    if not runs_turns(app):
        # The files and sandbox workers register the demo model at its first use, like the web
        # process (config/providers.py): most never call a model, and LiteLLM's import is
        # seconds of CPU at every start.
        return
    import demo

    # The offline demo model is a LiteLLM custom provider: a turn worker registers it at
    # start-up, as the warm-up below uses it.
    demo.register()
    from agent.llm import warm_up
    from chat.worker import loop as worker_loop
    from chat.worker import reaper

    loop = worker_loop.get()
    loop.run(warm_up())
    # Every worker looks for turns whose worker died (one of them per round does the work).
    loop.submit(reaper.run(loop.redis()))
    _start_operations(loop)
    # What is alive now (Django, Celery, LiteLLM and their imports: about a million objects)
    # lives as long as the process. Freezing it keeps the collector from walking it on every
    # full collection, which stopped all turns for 250-330 ms at a time in the benchmark.
    gc.collect()
    gc.freeze()
    # The loop thread shares the GIL with database calls and LiteLLM's end-of-stream work in
    # other threads; handing the GIL over every 0.5 ms instead of 5 ms keeps fragments on time
    # (one chat's p99 timer delay went from 10.7 to 1.6 ms in the benchmark).
    sys.setswitchinterval(0.0005)


def _start_operations(loop: "WorkerLoop") -> None:
    """The worker's heartbeat (what /readyz looks for) and its loop-lag metric, both beating
    from the loop that runs the turns, so a stuck loop shows."""
    from core import health, metrics

    metrics.forget_dead_processes()
    loop.submit(health.run_heartbeat(loop.redis(), turns=loop.in_flight, draining=lambda: loop.draining))
    loop.submit(health.watch_loop_lag())


@worker_ready.connect
def _resume_knowledge(**_: object) -> None:
    """A worker that reads files takes up the knowledge documents a dead worker left half-read,
    or whose messages the broker lost (knowledge.ingest: a second delivery is harmless)."""
    from django.conf import settings

    from knowledge import ingest

    if settings.FILES_QUEUE in set(app.amqp.queues.consume_from):
        ingest.requeue_unfinished()


@worker_shutting_down.connect
def _drain(how: str = "", **_: object) -> None:
    """SIGTERM (Celery's warm shutdown): running turns get the grace period, then end as
    interrupted (chat.worker.loop.WorkerLoop.drain). A cold shutdown (a second signal, SIGQUIT)
    exits at once and leaves its turns to another worker's reaper."""
    from django.conf import settings

    from chat.worker import loop as worker_loop

    if how == "Warm" and runs_turns(app):
        worker_loop.get().drain(float(settings.WORKER_SHUTDOWN_GRACE_S))


@worker_shutdown.connect
def _stop_turn_loop(**_: object) -> None:
    from core import tracing
    from sandbox import pool

    # The code sandboxes this worker holds end with it (their next call starts anew).
    pool.close_all()

    if runs_turns(app):
        from chat.worker import loop as worker_loop

        worker_loop.shutdown()
    # The last turns' spans leave before the process does.
    tracing.shutdown()
