"""Messages written while an answer runs (chat.models.PendingMessage): the queue, run one after
another as each answer completes, and steering, handed to the running agent at its next step.

- *Send* while an answer runs queues the message (`queue`). When a turn ends completed, its
  worker starts the first queued message as the chat's next exchange (`after_turn` →
  `start_next`), through the owner's fair share like any other turn. A turn that ends any
  other way (Stop, a failure, a lost worker) leaves the queue as it is: nothing runs until the
  person sends a message (the queue goes on after that one completes), sends a queued one now,
  or cancels them.
- *Steer* stores the text and posts its id to the turn's Redis mailbox (core.mailbox). The
  agent loop looks before each model call (chat.worker.steering.TurnInbox); what it takes
  becomes a user message of the turn at that step (`take_steers`), in order with the rest. A
  steer the answer ended without taking joins the front of the queue.

The chat's row lock (`exchanges.lock_idle`) orders all of this against sends and turn ends:
a message is queued only while a turn runs, and the queue is read only after it ended.
Every change pushes the whole box to every tab of the chat (`push_box`). Pushes from the web
and worker processes may overtake each other on the way, so each rendering carries a version
taken before its rows are read; a tab keeps the newest it has seen (static/js/chat.js)."""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from django.db import connection, transaction
from django.db.models import Max, Min
from django.template.loader import render_to_string

from core import mailbox
from core.redis_client import sync_client
from core.sql import column, table
from toolsets.files import attach
from toolsets.files import transcript as files_transcript
from toolsets.files.models import Attachment

from . import branches, live
from .events import ExchangeMessage, QueueMessage, group_name
from .exchanges import lock_idle, new_exchange_html, start_turn
from .models import Chat, Message, PendingMessage, Turn

log = logging.getLogger(__name__)
Kind = PendingMessage.Kind


def mailbox_key(turn_id: int) -> str:
    return live.key(turn_id, "steer")


# --- the box the page shows ---------------------------------------------------------------------
def _box_version(chat_id: int) -> int | None:
    """A number larger than every earlier rendering's of this chat's box. Taken before the rows
    are read, so the rendering with the largest one has read after every change that pushed
    one before it. None without Redis: the box is then applied whatever came before.

    The counter starts from the clock in microseconds, so one that expired (a chat idle for a
    week) starts again above every number an open tab may still hold."""
    name = f"tessera:chat:{chat_id}:box-version"
    try:
        pipe = sync_client().pipeline(transaction=True)
        pipe.set(name, time.time_ns() // 1000, nx=True)
        pipe.incr(name)
        pipe.expire(name, 7 * 86400)
        version = pipe.execute()[1]
    except Exception:
        log.warning("Versioning the waiting messages of chat %s failed", chat_id, exc_info=True)
        return None
    return int(version)


def box_context(chat: Chat) -> dict[str, Any]:
    """What `chat/_queue.html` shows: steers waiting for the running answer first, then the
    queue in order. A steer left by a turn that ended without taking it (its worker died) is
    shown, and run, as queued."""
    version = _box_version(chat.pk)
    running = chat.turns.filter(status__in=Turn.ACTIVE).exists()
    rows = list(PendingMessage.objects.filter(chat=chat))
    _with_files(chat, rows)
    steers = [r for r in rows if r.kind == Kind.STEER and running]
    queued = [r for r in rows if r not in steers]
    return {"chat": chat, "steers": steers, "queued": queued, "idle": not running, "version": version}


def box_html(chat: Chat, *, oob: bool = True, empty: bool = False) -> str:
    """The box; `empty`: the caller knows nothing waits (no query), the page still needs the box."""
    context = {"chat": chat, "steers": [], "queued": [], "idle": True} if empty else box_context(chat)
    return render_to_string("chat/_queue.html", {**context, "oob": oob})


def push_box(chat_id: int) -> None:
    """Every tab of the chat shows the box as it is now (blocking)."""
    chat = Chat.objects.filter(pk=chat_id).first()
    if chat is None:
        return
    message: QueueMessage = {"type": "chat.queue", "html": box_html(chat)}
    _send(chat_id, message)


def _send(chat_id: int, message: QueueMessage | ExchangeMessage) -> None:
    from channels.layers import get_channel_layer

    try:
        async_to_sync(get_channel_layer().group_send)(group_name(chat_id), message)
    except Exception:
        # The page shows the box again on reload or reconnect; the rows are the truth.
        log.warning("Pushing the waiting messages of chat %s failed", chat_id, exc_info=True)


# --- changes from the page (the chat's row locked by the caller where it says so) ---------------
def _with_files(chat: Chat, rows: list[PendingMessage]) -> None:
    """Each row's files (`row.files`, for the box), in one query for them all (none without)."""
    wanted = {pk for row in rows for pk in row.attachments}
    found = _files(chat, wanted) if wanted else {}
    for row in rows:
        row.files = [found[pk] for pk in row.attachments if pk in found]  # type: ignore[attr-defined]


def _files(chat: Chat, ids: set[int] | list[int]) -> dict[int, Attachment]:
    """The owner's files among `ids` not sent with a message yet (a deleted one is left out)."""
    rows = Attachment.objects.filter(owner_id=chat.owner_id, pk__in=ids, message__isnull=True)
    return {a.pk: a for a in rows.defer("text", "thumbnail")}


def _ids(files: list[Attachment] | None) -> list[int]:
    return [a.pk for a in files or []]


def queue(chat: Chat, content: str, files: list[Attachment] | None = None) -> PendingMessage:
    """Queues a message behind the others (call with the chat's row locked, a turn running),
    with the files it was sent with (checked by `attach.claim` like a sent message's)."""
    last = PendingMessage.objects.filter(chat=chat).aggregate(last=Max("position"))["last"]
    row = PendingMessage.objects.create(
        chat=chat, kind=Kind.QUEUED, content=content, position=(last or 0) + 1, attachments=_ids(files)
    )
    transaction.on_commit(lambda: push_box(chat.pk))
    return row


def steer(chat: Chat, turn: Turn, content: str, files: list[Attachment] | None = None) -> PendingMessage:
    """Stores guidance for the running `turn` (with its files) and posts it to the turn's
    mailbox once stored (call with the chat's row locked). Raises mailbox.Full past its limit."""
    if PendingMessage.objects.filter(chat=chat, kind=Kind.STEER).count() >= mailbox.MAX_ITEMS:
        raise mailbox.Full(str(turn.pk))
    row = PendingMessage.objects.create(chat=chat, kind=Kind.STEER, content=content, attachments=_ids(files))
    transaction.on_commit(lambda: mailbox.post(sync_client(), mailbox_key(turn.pk), str(row.pk)))
    transaction.on_commit(lambda: push_box(chat.pk))
    return row


def edit(chat: Chat, pending_id: int, content: str) -> bool:
    """False when the message is no longer waiting (run, taken by the agent, or cancelled)."""
    changed = PendingMessage.objects.filter(chat=chat, pk=pending_id).update(content=content)
    if changed:
        transaction.on_commit(lambda: push_box(chat.pk))
    return bool(changed)


def cancel(chat: Chat, pending_id: int) -> bool:
    deleted, _ = PendingMessage.objects.filter(chat=chat, pk=pending_id).delete()
    if deleted:
        transaction.on_commit(lambda: push_box(chat.pk))
    return bool(deleted)


def send_now(chat: Chat, pending_id: int) -> Turn | None:
    """Starts a waiting message as the chat's next exchange (the chat idle: call with its row
    locked by `lock_idle`); None when it is no longer waiting."""
    row = PendingMessage.objects.select_for_update().filter(chat=chat, pk=pending_id).first()
    return None if row is None else _start(chat, row)


def _start(chat: Chat, row: PendingMessage) -> Turn:
    message, turn = start_turn(chat, row.content, parent=branches.last_turn(chat), metadata={"queued": True})
    files = _files(chat, row.attachments) if row.attachments else {}
    attach.link([files[pk] for pk in row.attachments if pk in files], message)
    row.delete()
    # After the turn is queued for the workers (start_turn's own on_commit): no tab has sent
    # this exchange, so every tab is sent it; its worker's fragments follow (or the page syncs).
    # The box first: a tab never shows the message both waiting and asked.
    transaction.on_commit(lambda: push_box(chat.pk))
    transaction.on_commit(lambda: push_exchange(chat, turn, message))
    return turn


def push_exchange(chat: Chat, turn: Turn, message: Message) -> None:
    html = new_exchange_html(None, chat, turn, message)  # type: ignore[arg-type]
    wrapped = f'<div hx-swap-oob="beforeend:#messages">{html}</div>'
    _send(chat.pk, {"type": "chat.exchange", "turn": turn.pk, "html": wrapped})


# --- the worker's side ------------------------------------------------------------------------
def take_steers(chat_id: int, turn_id: int, step: int, ids: list[str]) -> list[str]:
    """The steers `ids` (from the turn's mailbox) still waiting, recorded as the user's
    messages of the turn before model call `step`, in the order they were sent, each with its
    files; what the model reads of them (a steer's text, and notes on its files as a sent
    message's: `files_transcript.FILES_MARK` starts them)."""
    wanted = [int(i) for i in ids if i.isdigit()]
    with transaction.atomic():
        rows = list(
            PendingMessage.objects.select_for_update()
            .filter(chat_id=chat_id, kind=Kind.STEER, pk__in=wanted)
            .order_by("id")
        )
        if not rows:
            return []
        files: dict[int, Attachment] = {}
        if any(r.attachments for r in rows):
            files = _files(Chat.objects.get(pk=chat_id), {pk for row in rows for pk in row.attachments})
        texts = []
        for row in rows:
            message = Message.objects.create(
                chat_id=chat_id,
                turn_id=turn_id,
                step=step,
                role=Message.Role.USER,
                content=row.content,
                metadata={"steered": True},
            )
            carried = [files[pk] for pk in row.attachments if pk in files]
            attach.link(carried, message)
            said = {"role": "user", "content": row.content}
            texts.append(
                files_transcript.with_files([message], [said], vision=False)[0]["content"] if carried else row.content
            )
        PendingMessage.objects.filter(pk__in=[r.pk for r in rows]).delete()
        transaction.on_commit(lambda: push_box(chat_id))
    return texts


@functools.cache
def _waiting_statement() -> str:
    return (
        f"SELECT 1 FROM {table(PendingMessage)} WHERE {column(PendingMessage, 'chat')} ="
        f" (SELECT {column(Turn, 'chat')} FROM {table(Turn)} WHERE {column(Turn, 'id')} = %s) LIMIT 1"
    )


def _any_waiting(turn_id: int) -> bool:
    """Whether the turn's chat has a waiting message. Plain SQL: every turn's end asks it, and
    built by the ORM the question cost several times what it takes to answer (the same reason
    as chat/worker/owner_facts.py); tables and columns are read from the models."""
    with connection.cursor() as cursor:
        cursor.execute(_waiting_statement(), [turn_id])
        return cursor.fetchone() is not None


def after_turn(turn_id: int) -> Turn | None:
    """A turn ended (blocking; its worker calls this last). Steers it did not take join the
    front of the queue; if it completed, the first queued message starts (returned)."""
    # One statement when nothing waits (most turns); the rows, not the mailbox, say what is left.
    if not _any_waiting(turn_id):
        return None
    turn = Turn.objects.filter(pk=turn_id).select_related("chat").first()
    if turn is None:
        return None
    chat = turn.chat
    started = None
    with transaction.atomic():
        idle = lock_idle(chat)
        left = list(PendingMessage.objects.filter(chat=chat, kind=Kind.STEER).order_by("id"))
        if left and idle:
            first = PendingMessage.objects.filter(chat=chat).aggregate(first=Min("position"))["first"] or 0
            for offset, row in enumerate(left):
                row.kind, row.position = Kind.QUEUED, first - len(left) + offset
            PendingMessage.objects.bulk_update(left, ["kind", "position"])
        if idle and turn.status == Turn.Status.COMPLETED:
            following = PendingMessage.objects.select_for_update().filter(chat=chat, kind=Kind.QUEUED).first()
            if following is not None:
                started = _start(chat, following)
    if started is None:
        push_box(chat.pk)  # the box shows Send now (or lost its steers) now that nothing runs
    return started
