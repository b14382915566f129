"""A chat's exchanges: starting one (shared by sending, editing, answering again and continuing)
and the page of them a chat shows."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.http import HttpRequest
from django.template.loader import render_to_string

from core import tracing
from toolsets.files.templatetags.files import shown_with

from . import branches, presenters
from .models import Chat, LLMModel, Message, Turn
from .worker import fair_share, turn_queue
from .worker.request import TurnRequest

TITLE_LENGTH = 60
# A chat page shows this many exchanges; older ones load as the reader scrolls up. A long chat
# then costs a page view what a short one does. With 30, a 200-message chat with tool cards and
# components scored 88-94 for performance in Lighthouse's mobile preset (a phone's CPU laying
# out and scripting 5 000 elements); with 8, 99-100 (bench/RESULTS.md).
PAGE_TURNS = 8
BUSY = "Wait for the current answer to finish, or stop it."


def start_turn(
    chat: Chat,
    content: str,
    *,
    parent: Turn | None,
    model: LLMModel | None = None,
    metadata: dict[str, Any] | None = None,
    request: TurnRequest | None = None,
    admitted: bool = False,
) -> tuple[Message, Turn]:
    """A new exchange after `parent` (a new version of an exchange when `parent` already has
    one: `branches.choose` then shows it). Call with the chat's row locked (so inside the
    caller's transaction: no savepoint of its own). `admitted`: the caller holds the turn's
    slot (`fair_share.submit`), so it goes straight to the workers. `request`: what a program
    asked the turn for (the hub), stored with it for the worker."""
    with transaction.atomic(savepoint=False):
        if model is None:
            # The chat's model, or (when the owner lost it) their default, which the chat
            # keeps from now on: the page said so (Chat.next_model's notice).
            model, lost = chat.next_model()
            if lost and model is not None:
                chat.model = model
                chat.save(update_fields=["model"])
        turn = Turn(chat=chat, model=model, parent=parent)
        turn.first_of_branch = parent is None
        turn.api = request.to_json() if request is not None else {}
        # The request's trace, when traces are on: the worker continues it (core/tracing.py).
        turn.trace_id = tracing.trace_id()
        turn.save()
        message = Message.objects.create(
            chat=chat, turn=turn, role=Message.Role.USER, content=content, metadata=metadata or {}
        )
        if not chat.title:
            chat.title = title_from(content)
        chat.save(update_fields=["title", "updated_at"])
        if admitted:
            # The caller took the turn's slot already (an API request, refused rather than queued).
            headers = tracing.task_headers()
            transaction.on_commit(lambda: turn_queue.dispatch([turn.pk], headers))
        else:
            # To the workers, or behind the owner's other turns (chat/worker/fair_share.py).
            transaction.on_commit(lambda: turn_queue.enqueue(turn, chat.owner_id))
    return message, turn


def lock_idle(chat: Chat) -> bool:
    """Locks the chat's row (two clicks or two tabs cannot both start a turn); False if a turn
    is running in it. Call inside a transaction. One query: the lock and the check."""
    running = Turn.objects.filter(chat=OuterRef("pk"), status__in=Turn.ACTIVE)
    busy = Chat.objects.select_for_update().filter(pk=chat.pk).annotate(busy=Exists(running))
    return not busy.values_list("busy", flat=True).first()


def title_from(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


def page_of_exchanges(
    chat: Chat, before: int | None = None, since: int | None = None
) -> tuple[list[dict[str, Any]], int | None]:
    """The exchanges of the branch the chat shows: the last PAGE_TURNS (before turn `before`,
    if given; or, with `since`, at least every one from that turn on), and the id to ask for
    the ones before them with, or None when there are none."""
    newest_first = branches.with_versions(chat.turns.filter(active=True)).order_by("-id")
    if before is not None:
        newest_first = newest_first.filter(pk__lt=before)
    size = PAGE_TURNS
    if since is not None:
        size = max(size, newest_first.filter(pk__gte=since).count())
    turns = list(newest_first[: size + 1])
    earlier = turns[size - 1].pk if len(turns) > size else None
    turns = turns[:size][::-1]
    return exchange_views(turns, latest=turns[-1].pk if turns and before is None else None), earlier


def exchange_views(turns: list[Turn], latest: int | None) -> list[dict[str, Any]]:
    views, asked = presenters.turn_views(turns)
    found = branches.versions(turns)
    exchanges = []
    for turn in turns:
        # Only the chat's latest answer can be continued (continue_answer checks it too).
        views[turn.pk]["can_continue"] = views[turn.pk]["can_continue"] and turn.pk == latest
        exchanges.append(presenters.exchange(turn.pk, asked.get(turn.pk), views[turn.pk], found.get(turn.pk)))
    return exchanges


def enabled_models(user_id: int, groups: frozenset[int] | None = None) -> list[LLMModel]:
    """The models the user may pick (enabled, open to their groups), in one query."""
    return list(LLMModel.for_user(user_id, groups).only("id", "name", "model", "is_default", "created_at"))


def new_exchange_html(
    request: HttpRequest, chat: Chat, turn: Turn, question: Message, files: list[Any] | None = None
) -> str:
    """A just-started exchange as the page appends it: the question (with `files`, when the
    caller has them: no query for them), and the turn waiting for its worker."""
    if files is not None:
        shown_with(question, files)
    view = presenters.turn(turn.pk, status=turn.status, steps=[])
    # Queued behind the owner's other turns: decided when the turn was committed, before this.
    note = fair_share.notes([turn.pk]).get(turn.pk)
    if note:
        view["queued_note"] = note
    exchange = presenters.exchange(turn.pk, question, view, None)
    return render_to_string(
        "chat/_exchange.html", {"chat": chat, "exchange": exchange, "models": enabled_models(chat.owner_id)}, request
    )
