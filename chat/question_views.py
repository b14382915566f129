"""Answering a question to the person (`core.questions`), of any kind, in one view.

The waiting question and its answer live in the one store; who may answer it is decided here,
once for every kind: the question's owner, and for a question asked in a chat, only while its
turn runs in a chat that person owns (a question of an MCP client's call has no chat: the
token's user answers it). Then the kind checks the answer (`KINDS`): an approval's decision and
reason, an MCP server's action and, for its form, the values against the server's schema, so a
wrong value is a 400 with the field's error and the question stays open. The store records the
first valid answer only (a 409 after it).

Two ways in: the card of a chat (`answer`, JSON for the card's script, at `/questions/<id>/`;
`/approvals/<id>/` and `/elicitations/<id>/` are the same view for one kind each) and the
approval page an MCP client sends its user to (`review`, URL-mode elicitation): a plain page
with a form, for a browser tab opened from another application."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods, require_POST

from core import questions
from core.http import AuthedRequest
from core.questions import Question
from core.redis_client import sync_client
from toolsets.mcp import elicitation, elicitation_form
from toolsets.models import ChatToolAllowance
from toolsets.policy import approval

from . import app_asking
from .models import Chat, Turn

GONE = {
    approval.KIND: "This call is no longer waiting for an answer.",
    elicitation.KIND: "This question is no longer waiting for an answer.",
    None: "This question is no longer waiting for an answer.",
}
ALREADY = {approval.KIND: "This call was already answered.", elicitation.KIND: "This question was already answered."}


@dataclass
class Answer:
    """What the person is told; `value` is what the store records when the status is 200."""

    status: int
    message: str
    errors: dict[str, str] = field(default_factory=dict)
    value: dict[str, Any] | None = None
    then: Callable[[], None] | None = None  # what the answer changes once recorded


def _approval(request: AuthedRequest, found: Question) -> Answer:
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "deny"):
        return Answer(400, "Choose Approve or Deny.")
    reason = " ".join(request.POST.get("reason", "").split())
    if len(reason) > approval.MAX_REASON or not reason.isprintable():
        return Answer(400, f"The reason must be printable text of at most {approval.MAX_REASON} characters.")
    approved = decision == "approve"
    payload = found.payload
    # "Always allow in this chat" means nothing without a chat.
    always = approved and request.POST.get("always") in ("1", "on", "true") and payload.get("chat_id") is not None
    if always and payload.get("always_allowable") is False:
        return Answer(400, "This tool asks every time: it cannot be always allowed.")

    def allow() -> None:
        chat = Chat.objects.get(pk=payload["chat_id"])
        ChatToolAllowance.objects.get_or_create(chat=chat, toolset_id=payload["toolset_id"], tool=payload["tool"])

    value = approval.answer_value(approved=approved, reason=reason, always=always)
    return Answer(200, "Approved." if approved else "Denied.", value=value, then=allow if always else None)


def _elicitation(request: AuthedRequest, found: Question) -> Answer:
    action = request.POST.get("action", "")
    if action not in elicitation.ACTIONS:
        return Answer(400, "Choose Accept, Decline or Cancel.")
    content = None
    if action == "accept" and found.payload.get("mode") == "form":
        fields = found.payload.get("fields") or []
        content, errors = elicitation_form.parse(fields, request.POST)
        if not errors:
            errors = elicitation_form.check(fields, found.payload.get("schema") or {}, content)
        if errors:
            return Answer(400, "Check the highlighted fields.", errors=errors)
    message = {"accept": "Sent.", "decline": "Declined.", "cancel": "Cancelled."}[action]
    return Answer(200, message, value={"action": action, "content": content})


# Each kind's check of an answer: the request's form → what the store records.
KINDS: dict[str, Callable[[AuthedRequest, Question], Answer]] = {
    approval.KIND: _approval,
    elicitation.KIND: _elicitation,
}


def _waiting(request: AuthedRequest, question_id: str, kind: str | None) -> Question | None:
    """The open question if this person may answer it, else None (also for someone else's: it
    is not theirs to know about)."""
    found = questions.pending(sync_client(), question_id, kind)
    if found is None or found.kind not in KINDS or found.owner_id != request.user.pk:
        return None
    turn_id = found.payload.get("turn_id")
    if turn_id is None:
        return found  # an MCP client's call: the token's user answers, in no chat
    if app_asking.asked_by_view(found.payload):
        # A call of an app's View on a card whose turn has ended: the chat's owner answers.
        owned = Chat.objects.filter(pk=found.payload.get("chat_id") or 0, owner=request.user).exists()
        return found if owned else None
    running = Turn.objects.filter(
        pk=turn_id, chat_id=found.payload.get("chat_id") or 0, chat__owner=request.user, status=Turn.Status.RUNNING
    ).exists()
    return found if running else None


def _answer(request: AuthedRequest, question_id: str, found: Question | None, kind: str | None) -> Answer:
    if found is None:
        return Answer(404, GONE[kind])
    checked = KINDS[found.kind](request, found)
    if checked.status != 200 or checked.value is None:
        return checked
    recorded = questions.answer(sync_client(), question_id, checked.value)
    if recorded == "gone":
        return Answer(404, GONE[found.kind])
    if recorded == "answered":
        return Answer(409, ALREADY[found.kind])
    if checked.then is not None:
        checked.then()
    return checked


@login_required
@require_POST
def answer(request: AuthedRequest, question_id: str, kind: str | None = None) -> HttpResponse:
    """An answer on a question's card (any tab of its owner; the first answer wins). `kind`:
    this URL answers questions of that kind only."""
    given = _answer(request, question_id, _waiting(request, question_id, kind), kind)
    body: dict[str, object] = {"ok": given.status == 200, "message": given.message}
    if given.errors:
        body["errors"] = given.errors
    return JsonResponse(body, status=given.status)


@login_required
@require_http_methods(["GET", "POST"])
def review(request: AuthedRequest, approval_id: str) -> HttpResponse:
    """The page an MCP client opens for its user: what would run, Approve or Deny."""
    found = _waiting(request, approval_id, approval.KIND)
    given = _answer(request, approval_id, found, approval.KIND) if request.method == "POST" else None
    context: dict[str, Any] = {"approval_id": approval_id, "answer": given, "gone": found is None}
    if found is not None:
        payload = found.payload
        context.update(
            display_name=payload.get("display_name", ""),
            # The audit log's "mcp: <name>" without its prefix: the name the user knows.
            client=str(payload.get("client", "")).removeprefix("mcp: ") or "An MCP client",
            arguments=json.dumps(payload.get("arguments") or {}, indent=2, ensure_ascii=False, sort_keys=True),
            deadline_text=datetime.fromtimestamp(found.deadline, UTC).strftime("%H:%M UTC"),
        )
    status = given.status if given is not None else (404 if found is None else 200)
    return render(request, "chat/approval_page.html", context, status=status)
