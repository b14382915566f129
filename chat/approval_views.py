"""Approve or Deny an "ask" call. The waiting request and its answer live in Redis
(`toolsets.policy.approval`); who may answer it is decided here: a chat's call must belong to a
running turn of a chat the person owns; an MCP client's call (no chat) belongs to the token's user.

Two ways in: the approval card of a chat (`answer_approval`, JSON for the card's script) and the
approval page an MCP client sends its user to (`review`, URL-mode elicitation): a plain page
with a form, for a browser tab opened from another application."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods, require_POST

from core.http import AuthedRequest
from core.redis_client import sync_client
from toolsets.models import ChatToolAllowance
from toolsets.policy import approval

from .models import Chat, Turn

GONE = "This call is no longer waiting for an answer."


@dataclass
class Answer:
    status: int
    message: str


def _waiting(request: AuthedRequest, approval_id: str) -> dict[str, Any] | None:
    """The open request if this person may answer it, else None (also for someone else's: it
    is not theirs to know about)."""
    found = approval.pending(sync_client(), approval_id)
    if found is None or found.get("user_id") != request.user.pk:
        return None
    if found.get("turn_id") is None:
        return found  # an MCP client's call: the token's user answers, in no chat
    running = Turn.objects.filter(
        pk=found["turn_id"], chat_id=found["chat_id"], chat__owner=request.user, status=Turn.Status.RUNNING
    ).exists()
    return found if running else None


def _answer(request: AuthedRequest, approval_id: str, found: dict[str, Any] | None) -> Answer:
    if found is None:
        return Answer(404, GONE)
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "deny"):
        return Answer(400, "Choose Approve or Deny.")
    reason = " ".join(request.POST.get("reason", "").split())
    if len(reason) > approval.MAX_REASON or not reason.isprintable():
        return Answer(400, f"The reason must be printable text of at most {approval.MAX_REASON} characters.")
    approved = decision == "approve"
    # "Always allow in this chat" means nothing without a chat.
    always = approved and request.POST.get("always") in ("1", "on", "true") and found.get("chat_id") is not None
    if always and found.get("always_allowable") is False:
        return Answer(400, "This tool asks every time: it cannot be always allowed.")
    if not approval.answer(sync_client(), approval_id, approved=approved, reason=reason, always=always):
        return Answer(409, "This call was already answered.")
    if always:
        chat = Chat.objects.get(pk=found["chat_id"])
        ChatToolAllowance.objects.get_or_create(chat=chat, toolset_id=found["toolset_id"], tool=found["tool"])
    return Answer(200, "Approved." if approved else "Denied.")


@login_required
@require_POST
def answer_approval(request: AuthedRequest, approval_id: str) -> HttpResponse:
    """Approve or Deny on an approval card (any tab of the chat's owner; the first answer wins)."""
    answer = _answer(request, approval_id, _waiting(request, approval_id))
    return JsonResponse({"ok": answer.status == 200, "message": answer.message}, status=answer.status)


@login_required
@require_http_methods(["GET", "POST"])
def review(request: AuthedRequest, approval_id: str) -> HttpResponse:
    """The page an MCP client opens for its user: what would run, Approve or Deny."""
    found = _waiting(request, approval_id)
    answer = _answer(request, approval_id, found) if request.method == "POST" else None
    context: dict[str, Any] = {"approval_id": approval_id, "answer": answer, "gone": found is None}
    if found is not None:
        deadline = datetime.fromtimestamp(float(found.get("deadline") or time.time()), UTC)
        context.update(
            display_name=found.get("display_name", ""),
            # The audit log's "mcp: <name>" without its prefix: the name the user knows.
            client=str(found.get("client", "")).removeprefix("mcp: ") or "An MCP client",
            arguments=json.dumps(found.get("arguments") or {}, indent=2, ensure_ascii=False, sort_keys=True),
            deadline_text=deadline.strftime("%H:%M UTC"),
        )
    status = answer.status if answer is not None else (404 if found is None else 200)
    return render(request, "chat/approval_page.html", context, status=status)
