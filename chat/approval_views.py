"""Approve or Deny on an approval card. The waiting request and its answer live in Redis
(`toolsets.policy.approval`); whether anyone may still answer it is the chat's business: the
request must belong to a running turn of a chat the person owns."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from core.http import AuthedRequest
from core.redis_client import sync_client
from toolsets.models import ChatToolAllowance
from toolsets.policy import approval

from .models import Chat, Turn


@login_required
@require_POST
def answer_approval(request: AuthedRequest, approval_id: str) -> HttpResponse:
    """Approve or Deny on an approval card (any tab of the chat's owner; the first answer wins)."""
    found = approval.pending(sync_client(), approval_id)
    running = found is not None and (
        Turn.objects.filter(
            pk=found["turn_id"], chat_id=found["chat_id"], chat__owner=request.user, status=Turn.Status.RUNNING
        ).exists()
    )
    if found is None or not running or found.get("user_id") != request.user.pk:
        # Also for someone else's approval: it is not theirs to know about.
        return _answer(404, "This call is no longer waiting for an answer.")
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "deny"):
        return _answer(400, "Choose Approve or Deny.")
    reason = " ".join(request.POST.get("reason", "").split())
    if len(reason) > approval.MAX_REASON or not reason.isprintable():
        return _answer(400, f"The reason must be printable text of at most {approval.MAX_REASON} characters.")
    approved = decision == "approve"
    always = approved and request.POST.get("always") in ("1", "on", "true")
    if always and found.get("always_allowable") is False:
        return _answer(400, "This tool asks every time: it cannot be always allowed.")
    if not approval.answer(sync_client(), approval_id, approved=approved, reason=reason, always=always):
        return _answer(409, "This call was already answered.")
    if always:
        chat = Chat.objects.get(pk=found["chat_id"])
        ChatToolAllowance.objects.get_or_create(chat=chat, toolset_id=found["toolset_id"], tool=found["tool"])
    return _answer(200, "Approved." if approved else "Denied.")


def _answer(status: int, message: str) -> JsonResponse:
    return JsonResponse({"ok": status == 200, "message": message}, status=status)
