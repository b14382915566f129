"""Views on one exchange (a turn): continuing a cut answer, editing its question, answering it
again, showing another version, and an answer's Markdown."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from chat.worker.prompts import CONTINUE_PROMPT
from core.http import AuthedRequest
from toolsets.files import attach

from . import branches, dom, forms
from .exchanges import BUSY, enabled_models, lock_idle, new_exchange_html, page_of_exchanges, start_turn
from .models import Chat, LLMModel, Message, Turn


@login_required
@require_POST
def continue_answer(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Starts a turn that continues an answer cut by the token limit: the chat's latest turn,
    finished, whose last model call ended with finish_reason "length"."""
    turn = get_object_or_404(Turn.objects.select_related("chat"), pk=turn_id, chat__owner=request.user)
    chat = turn.chat
    with transaction.atomic():
        if not lock_idle(chat):
            return HttpResponse(BUSY, status=409)
        latest = branches.last_turn(chat)
        if latest is None or latest.pk != turn.pk:
            return HttpResponse("Only the latest answer can be continued.", status=409)
        last = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).order_by("-step", "-id").first()
        if turn.status != Turn.Status.COMPLETED or last is None or last.finish_reason != "length":
            return HttpResponse("This answer was not cut by the token limit.", status=400)
        message, new_turn = start_turn(chat, CONTINUE_PROMPT, parent=turn, metadata={"continues": turn.pk})
    html = new_exchange_html(request, chat, new_turn, message)
    # The button under the answer that was continued goes away.
    cleared = f'<div class="turn-continue" id="{dom.continue_box(turn.pk)}" hx-swap-oob="true"></div>'
    return HttpResponse(html + cleared)


def _get_turn_for_user(request: AuthedRequest, turn_id: int) -> Turn:
    return get_object_or_404(Turn.objects.select_related("chat", "chat__model"), pk=turn_id, chat__owner=request.user)


def _question(turn: Turn) -> Message | None:
    return Message.objects.filter(turn=turn, role=Message.Role.USER, lane="").order_by("id").first()


def _branch_response(request: AuthedRequest, chat: Chat, focus: Turn) -> HttpResponse:
    """The chat's messages after a change of branch: every exchange from the changed one on
    (and the usual page before it), for #messages; the page keeps the versions switcher of the
    changed exchange where the reader's eyes were."""
    exchanges, earlier = page_of_exchanges(chat, since=focus.pk)
    context = {"chat": chat, "exchanges": exchanges, "earlier": earlier, "models": enabled_models(chat.owner_id)}
    response = render(request, "chat/_earlier_page.html", context)
    response["HX-Trigger-After-Settle"] = json.dumps({"tessera:branch": {"focus": dom.versions(focus.pk)}})
    return response


@login_required
@require_POST
def edit_message(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Sends an edited question as a new version of its exchange; the earlier version, with its
    answer and everything after it, stays as another branch."""
    turn = _get_turn_for_user(request, turn_id)
    form = forms.MessageForm(request.POST)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    question = _question(turn)
    if question is None or (question.metadata or {}).get("continues"):
        return HttpResponse("This message cannot be edited.", status=400)
    return _new_version(request, turn, question, form.cleaned_data["content"])


@login_required
@require_POST
def regenerate(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Answers a question again, as a new version of its exchange: with the model the answer
    used, or the one chosen."""
    turn = _get_turn_for_user(request, turn_id)
    form = forms.RegenerateForm(request.POST, user_id=request.user.pk)
    if not form.is_valid():
        return HttpResponse(forms.first_error(form), status=400)
    question = _question(turn)
    if question is None:
        return HttpResponse("This answer has no question to answer again.", status=400)
    model = form.cleaned_data["model"] or (turn.model if turn.model and turn.model.open_to(request.user.pk) else None)
    return _new_version(request, turn, question, question.content, model=model, metadata=question.metadata)


def _new_version(
    request: AuthedRequest,
    turn: Turn,
    question: Message,
    content: str,
    *,
    model: LLMModel | None = None,
    metadata: dict[str, Any] | None = None,
) -> HttpResponse:
    """Starts another version of the exchange (the question's files go with it) and shows it."""
    with transaction.atomic():
        if not lock_idle(turn.chat):
            return HttpResponse(BUSY, status=409)
        message, new_turn = start_turn(turn.chat, content, parent=turn.parent, model=model, metadata=metadata)
        attach.carry(question, message)
        branches.choose(new_turn)
    return _branch_response(request, turn.chat, new_turn)


@login_required
@require_POST
def choose_version(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """Shows another version of an exchange, and below it the branch that version leads to."""
    turn = _get_turn_for_user(request, turn_id)
    with transaction.atomic():
        if not lock_idle(turn.chat):
            return HttpResponse(BUSY, status=409)
        branches.choose(turn)
    return _branch_response(request, turn.chat, turn)


@login_required
@require_GET
def answer_markdown(request: AuthedRequest, turn_id: int) -> HttpResponse:
    """An answer's source, as the model wrote it (what Copy puts on the clipboard): Markdown,
    with a component block as its JSON."""
    turn = _get_turn_for_user(request, turn_id)
    texts = Message.objects.filter(turn=turn, lane="", role=Message.Role.ASSISTANT).order_by("step", "id")
    text = "\n\n".join(t.strip() for t in texts.values_list("content", flat=True) if t.strip())
    return HttpResponse(text, content_type="text/plain; charset=utf-8")
