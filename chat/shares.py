"""Shared chats: a read-only link to a snapshot of a chat.

Sharing takes the exchanges of the branch on screen (finished turns only); later messages and
other branches are not in the share. The shared page renders them with the chat's own partials
but no controls and no websocket; the questions' files are listed and downloadable (through
the share) only when the sharer ticked it. Anyone signed in may open a share; with the admin's
`public_shares` switch, a share marked public opens without signing in too. A revoked share is
a 404, like one that never existed. Anyone signed in may continue a share as a chat of their
own (a copy of its messages, tool and delegation cards, as the page shows them: results cut where
the page cuts them; not the files).
"""

from __future__ import annotations

import secrets
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.http import AuthedRequest
from toolsets.files.models import Attachment
from toolsets.files.views import as_download
from toolsets.models import ToolExecution

from . import share_copy
from .exchanges import exchange_views
from .models import AppSettings, Chat, ChatShare, LLMModel, Message, Turn

MAX_SHARES_PER_CHAT = 20


class ShareForm(forms.Form):
    public = forms.BooleanField(required=False)
    include_files = forms.BooleanField(required=False)


def _owned_chat(request: AuthedRequest, chat_id: int) -> Chat:
    return get_object_or_404(Chat, pk=chat_id, owner=request.user)


def _snapshot(chat: Chat) -> list[int]:
    # The branch on screen: the active turns, oldest first; one still running is left out.
    finished = chat.turns.filter(active=True).exclude(status__in=Turn.ACTIVE).order_by("id")
    return list(finished.values_list("id", flat=True))


@login_required
@require_http_methods(["GET", "POST"])
def share_chat(request: AuthedRequest, chat_id: int) -> HttpResponse:
    """The chat's Share page: what a share is, the form to make one, and this chat's shares."""
    chat = _owned_chat(request, chat_id)
    app = AppSettings.load()
    status = 200
    error = ""
    if request.method == "POST":
        form = ShareForm(request.POST)
        turn_ids = _snapshot(chat)
        if not form.is_valid():
            error, status = "The form is not valid.", 400
        elif not turn_ids:
            error, status = "There is nothing to share yet: send a message first.", 400
        elif chat.shares.filter(revoked_at=None).count() >= MAX_SHARES_PER_CHAT:
            error, status = f"A chat can have at most {MAX_SHARES_PER_CHAT} links: revoke one first.", 400
        else:
            ChatShare.objects.create(
                chat=chat,
                token=secrets.token_urlsafe(24),
                title=chat.title,
                turn_ids=turn_ids,
                public=form.cleaned_data["public"] and app.public_shares,
                include_files=form.cleaned_data["include_files"],
            )
            return redirect("chat:share", chat_id=chat.pk)
    context = {
        "chat": chat,
        "app": app,
        "error": error,
        "shares": chat.shares.filter(revoked_at=None),
    }
    return render(request, "chat/share.html", context, status=status)


@login_required
@require_POST
def revoke_share(request: AuthedRequest, share_id: int) -> HttpResponse:
    share = get_object_or_404(ChatShare, pk=share_id, chat__owner=request.user, revoked_at=None)
    share.revoked_at = timezone.now()
    share.save(update_fields=["revoked_at"])
    back = request.POST.get("next", "")
    if back == "account":
        return redirect("accounts:account")
    return redirect("chat:share", chat_id=share.chat_id)


def _open_share(token: str) -> ChatShare:
    if not 16 <= len(token) <= 64:
        raise Http404("No such shared chat.")
    share = ChatShare.objects.select_related("chat__owner").filter(token=token, revoked_at=None).first()
    if share is None:
        raise Http404("No such shared chat.")
    return share


def _visible_without_sign_in(share: ChatShare) -> bool:
    return share.public and AppSettings.load().public_shares


@require_GET
def shared_chat(request: HttpRequest, token: str) -> HttpResponse:
    share = _open_share(token)
    if not request.user.is_authenticated and not _visible_without_sign_in(share):
        return redirect_to_login(request.get_full_path())
    turns = list(Turn.objects.filter(chat_id=share.chat_id, pk__in=share.turn_ids).order_by("id"))
    exchanges = exchange_views(turns, latest=None)
    # Only when the sharer ticked it: the files of the shared questions, downloadable through
    # the share (shared_file), never through the owner's own file pages.
    files: dict[int, list[dict[str, Any]]] = {}
    if share.include_files:
        for row in _shared_files(share).values("id", "messages__turn_id", "name", "size").order_by("id"):
            files.setdefault(row["messages__turn_id"], []).append(dict(row))
    for exchange in exchanges:
        exchange["shared_files"] = files.get(exchange["turn_id"], [])
    owner = share.chat.owner
    context = {
        "share": share,
        "exchanges": exchanges,
        "sharer": owner.get_full_name() or owner.get_username(),
    }
    response = render(request, "chat/shared.html", context)
    # A shared page is not for search engines or other sites' frames.
    response["X-Robots-Tag"] = "noindex"
    return response


def _shared_files(share: ChatShare) -> Any:
    """The files the share's questions carry: those of the user's own messages in the shared
    turns of the shared chat, and nothing else of the owner's."""
    return Attachment.objects.filter(
        messages__chat_id=share.chat_id,
        messages__turn_id__in=share.turn_ids,
        messages__role=Message.Role.USER,
        messages__lane="",
    )


@require_GET
def shared_file(request: HttpRequest, token: str, file_id: int) -> HttpResponseBase:
    """A file of a shared chat, checked against the share (never against who owns the file):
    only while the share works, only if the sharer ticked "include files", only one the shared
    questions carry. Anything else is a 404, like a file that does not exist."""
    share = _open_share(token)
    if not request.user.is_authenticated and not _visible_without_sign_in(share):
        return redirect_to_login(request.get_full_path())
    if not share.include_files:
        raise Http404("No such file.")
    attachment = _shared_files(share).filter(pk=file_id).distinct().first()
    if attachment is None:
        raise Http404("No such file.")
    response = as_download(attachment)
    response["X-Robots-Tag"] = "noindex"
    return response


@login_required
@require_POST
def continue_share(request: AuthedRequest, token: str) -> HttpResponse:
    """Copies the share's exchanges (messages and tool cards) into a new chat of the caller's."""
    share = _open_share(token)
    with transaction.atomic():
        chat = Chat.objects.create(
            owner=request.user, title=share.title, model=LLMModel.default(request.user.pk), enabled_tools={}
        )
        parent: Turn | None = None
        turns = Turn.objects.filter(chat_id=share.chat_id, pk__in=share.turn_ids).order_by("id")
        for turn in turns:
            old_id = turn.pk
            copy = Turn.objects.create(
                chat=chat,
                model=turn.model,
                parent=parent,
                status=turn.status,
                iterations=turn.iterations,
                error=turn.error,
                error_kind=turn.error_kind,
                notices=turn.notices,
                usage=turn.usage,
                started_at=turn.started_at,
                first_token_at=turn.first_token_at,
                finished_at=turn.finished_at,
            )
            parent = copy
            _copy_as_shown(old_id, chat, copy, request.user.pk)
    return redirect("chat:detail", chat_id=chat.pk)


def _copy_as_shown(turn_id: int, chat: Chat, copy: Turn, user_id: int) -> None:
    """A shared turn's messages and tool records into `copy`, each tool result cut down to what
    the share page shows of it (chat/share_copy.py), the model's copy of it as well."""
    messages = list(Message.objects.filter(turn_id=turn_id).order_by("id"))
    executions = list(ToolExecution.objects.filter(turn_id=turn_id).order_by("id"))
    by_place = {(e.lane, e.step, e.position): e for e in executions}
    positions = {
        (m.lane, m.step, str(call.get("id", ""))): position
        for m in messages
        for position, call in enumerate(m.tool_calls or [])
        if isinstance(call, dict)
    }
    names = share_copy.call_names(messages)
    for message in messages:
        if message.role == Message.Role.TOOL:
            key = (message.lane, message.step, message.tool_call_id)
            position = positions.get(key)
            execution = by_place.get((message.lane, message.step, position)) if position is not None else None
            message.content = share_copy.model_copy(execution, names.get(key, ""), message.content)
        message.pk = None
        message.chat, message.turn = chat, copy
        message.save()
    for execution in executions:
        execution.result = share_copy.shown_result(execution)
        # Not on the card: the arguments are shown parsed, never as the model sent them.
        execution.raw_arguments = ""
        execution.pk = None
        execution.turn_id, execution.user_id = copy.pk, user_id
        execution.save()


def shares_of(user_id: int) -> Any:
    """For the account page: the user's links that still work, newest first."""
    return ChatShare.objects.filter(chat__owner_id=user_id, revoked_at=None).select_related("chat")
