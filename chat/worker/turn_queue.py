"""Sending turns to the workers through their owners' fair share (chat/worker/fair_share.py): a new
turn goes to the workers when it holds a slot, else it waits in its owner's queue and its page
says so; an ended turn hands its slot to the next one.

Web processes call the blocking functions; a worker's loop calls `released` (a coroutine)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from celery import current_app

from chat.events import FINAL_SEQ, StatusMessage, group_name, send_fragment
from chat.models import Turn
from core import tracing

from . import fair_share
from .fair_share import Caps
from .request import TurnRequest

log = logging.getLogger(__name__)

RUN_TURN = "chat.run_turn"  # chat/tasks.py


def principal(turn: Turn) -> str:
    """The API token (or OAuth client) a turn came through; "" for the chat's own."""
    request = TurnRequest.of(turn)
    return request.principal if request else ""


def dispatch(turn_ids: list[int], headers: dict[str, Any] | None = None) -> None:
    """Sends admitted turns to the workers (blocking: a broker write each). The task is named,
    not imported: its module runs turns, and a turn that ends hands its slot back through here.
    Where the task is loaded (workers, tests) its own `apply_async` sends it; elsewhere the
    same message goes by name."""
    for turn_id in turn_ids:
        current_app.signature(RUN_TURN, args=(turn_id,)).apply_async(headers=headers or {})


def pump(user_id: int, caps: Caps | None = None) -> list[int]:
    """Sends the user's queued turns that now fit to the workers; returns their ids. A turn
    stopped or deleted while it waited gives its slot straight back (and the next one goes)."""
    caps = caps or Caps.load()
    sent: list[int] = []
    admitted = fair_share.pump(user_id, caps)
    while admitted:
        ids = [turn_id for turn_id, _ in admitted]
        queued = set(Turn.objects.filter(pk__in=ids, status=Turn.Status.QUEUED).values_list("pk", flat=True))
        dispatch([turn_id for turn_id in ids if turn_id in queued])
        sent += [turn_id for turn_id in ids if turn_id in queued]
        gone = [(turn_id, token) for turn_id, token in admitted if turn_id not in queued]
        if not gone:
            break
        for turn_id, token in gone:
            fair_share.release(turn_id, user_id, token)
        admitted = fair_share.pump(user_id, caps)
    return sent


def enqueue(turn: Turn, owner_id: int) -> None:
    """Called once the new turn is committed: to the workers now, or queued with a note on its
    page (live over the socket, and on reload)."""
    headers = tracing.task_headers()
    caps = Caps.load()
    try:
        admitted = fair_share.submit(turn.pk, owner_id, principal(turn), caps=caps)
    except Exception:
        # Redis is down: the broker is too, and the turn will fail to send either way; without a
        # slot it at least is not stuck in a queue nobody pumps.
        log.warning("Taking a slot for turn %s failed; sending it without one", turn.pk, exc_info=True)
        admitted = True
    if admitted:
        dispatch([turn.pk], headers)
        return
    note = fair_share.queued_note(caps)
    fair_share.sync_client().set(fair_share.note_key(turn.pk), note, ex=fair_share.NOTE_TTL_S)
    send_status(turn.chat_id, turn.pk, queued_state_html(turn.pk, note))
    # A slot may have come free between the check and the queueing (a turn ending elsewhere
    # pumped an empty queue): pumping once more here never leaves a turn stranded.
    pump(owner_id, caps)


def queued_state_html(turn_id: int, note: str) -> str:
    from chat.presenters import turn
    from chat.presenters.fragments import render

    view = turn(turn_id, status=Turn.Status.QUEUED, steps=[])
    view["queued_note"] = note
    return render("chat/_turn_state.html", {"turn": view, "oob": True})


def send_status(chat_id: int, turn_id: int, html: str) -> None:
    from channels.layers import get_channel_layer

    message: StatusMessage = {"type": "chat.status", "turn": turn_id, "html": html}
    async_to_sync(get_channel_layer().group_send)(group_name(chat_id), message)


def withdraw(turn: Turn) -> None:
    """Stop on a queued turn (already marked cancelled): out of its owner's queue (its slot, if
    it had one, back), and the page shows it stopped (no worker will say so)."""
    from chat import presenters

    owner_id = turn.chat.owner_id
    if fair_share.release(turn.pk, owner_id, principal(turn)):
        pump(owner_id)
    view = presenters.stored_turn_view(turn.pk)
    if view is not None:
        html = presenters.turn_fragment({**view, "seq": FINAL_SEQ})
        async_to_sync(send_fragment)(turn.chat_id, turn.pk, FINAL_SEQ, html, full=True)


def released(turn_id: int, owner_id: int, token: str, forget: Iterable[str] = ()) -> None:
    """A turn ended (or was never to run): its slot back, the owner's next turns off (blocking:
    a worker calls it through its loop's thread pool). `forget`: the turn's keys to delete in
    the same round trip."""
    try:
        if fair_share.release(turn_id, owner_id, token, forget):
            pump(owner_id)
    except Exception:
        # The slot lapses by itself (no heartbeat) and the reaper's round pumps the queue.
        log.warning("Handing back turn %s's slot failed", turn_id, exc_info=True)


def pump_all() -> None:
    """The reaper's round: queues whose slots lapsed (a worker died) move on (blocking)."""
    caps = Caps.load()
    for user_id in fair_share.waiting_users():
        pump(user_id, caps)
