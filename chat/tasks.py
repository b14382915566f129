from __future__ import annotations

from celery import Task, shared_task
from celery.exceptions import Reject

from chat.worker.turns import run_turn_sync
from core import logs, tracing

from .worker import loop as worker_loop


@shared_task(name="chat.run_turn", acks_late=True, reject_on_worker_lost=True, bind=True)
def run_turn(self: Task, turn_id: int) -> None:
    """Thin adapter: the turn's id in, everything else in chat.worker.turns."""
    if worker_loop.draining():
        # A message that arrived just as SIGTERM did: back to the queue, for the next worker.
        raise Reject("the worker is shutting down", requeue=True)
    # Records of the pool thread (Celery's own among them) name the turn too.
    with logs.turn_context(turn_id, None, None):
        # The trace of the request that sent the message, from the task's headers.
        run_turn_sync(turn_id, trace_carrier=tracing.carrier_from(self.request))
