"""Views on a chat's waiting messages (chat/pending.py): steering the running answer, and
editing, cancelling or sending now a queued message. Each answers with the box as it is now
(every tab also gets it over the socket)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST

from core import mailbox
from core.http import AuthedRequest
from toolsets.files import attach

from . import forms, pending
from .exchanges import lock_idle
from .models import Chat, Turn

NOTHING_RUNNING = "The answer has ended: send your message instead."
GONE = "This message is no longer waiting: it was sent, read by the agent, or cancelled."
TOO_MANY = "Too many steers are waiting for this answer; wait for the agent to read them."
BUSY_NOW = "An answer is running: this message runs when it ends."


def _chat(request: AuthedRequest, chat_id: int) -> Chat:
    # Another user's chat is a 404, never a 403 (as chat.views._get_chat_for_user).
    return get_object_or_404(Chat, pk=chat_id, owner=request.user)


def _box(chat: Chat) -> HttpResponse:
    return HttpResponse(pending.box_html(chat))


@login_required
@require_POST
def steer(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = _chat(request, chat_id)
    form = forms.MessageForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    try:  # the same checks as a sent message's files
        files = attach.claim(request.user.pk, request.POST.getlist("attachments"))
    except attach.Refused as exc:
        return HttpResponse(str(exc), status=400)
    with transaction.atomic():
        if lock_idle(chat):
            return HttpResponse(NOTHING_RUNNING, status=409)
        turn = chat.turns.filter(status__in=Turn.ACTIVE).order_by("-id").first()
        if turn is None:  # not reached: the lock said a turn is active
            return HttpResponse(NOTHING_RUNNING, status=409)
        try:
            pending.steer(chat, turn, form.cleaned_data["content"], files)
        except mailbox.Full:
            return HttpResponse(TOO_MANY, status=429)
    return _box(chat)


@login_required
@require_POST
def edit(request: AuthedRequest, chat_id: int, pending_id: int) -> HttpResponse:
    chat = _chat(request, chat_id)
    form = forms.MessageForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    with transaction.atomic():
        if not pending.edit(chat, pending_id, form.cleaned_data["content"]):
            return HttpResponse(GONE, status=404)
    return _box(chat)


@login_required
@require_POST
def cancel(request: AuthedRequest, chat_id: int, pending_id: int) -> HttpResponse:
    chat = _chat(request, chat_id)
    with transaction.atomic():
        if not pending.cancel(chat, pending_id):
            return HttpResponse(GONE, status=404)
    return _box(chat)


@login_required
@require_POST
def send_now(request: AuthedRequest, chat_id: int, pending_id: int) -> HttpResponse:
    """Runs a waiting message now (the queue is paused after a Stop); the exchange reaches every
    tab over the socket."""
    chat = _chat(request, chat_id)
    with transaction.atomic():
        if not lock_idle(chat):
            return HttpResponse(BUSY_NOW, status=409)
        if pending.send_now(chat, pending_id) is None:
            return HttpResponse(GONE, status=404)
    return _box(chat)
