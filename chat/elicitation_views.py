"""Accept, Decline or Cancel on an MCP server's question (elicitation card). The waiting
question and its answer live in Redis (`toolsets.mcp.elicitation`); whether anyone may still
answer it is the chat's business: the question must belong to a running turn of a chat the
person owns. A form's answer is checked against the server's schema here, before the waiting
worker sees it: a wrong value is a 400 with the field's error, and the question stays open."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from core.http import AuthedRequest
from core.redis_client import sync_client
from toolsets.mcp import elicitation

from .models import Turn

ACTIONS = ("accept", "decline", "cancel")


@login_required
@require_POST
def answer_elicitation(request: AuthedRequest, elicitation_id: str) -> HttpResponse:
    found = elicitation.pending(sync_client(), elicitation_id)
    running = found is not None and (
        Turn.objects.filter(
            pk=found["turn_id"], chat_id=found["chat_id"], chat__owner=request.user, status=Turn.Status.RUNNING
        ).exists()
    )
    if found is None or not running or found.get("user_id") != request.user.pk:
        # Also for someone else's question: it is not theirs to know about.
        return _answer(404, "This question is no longer waiting for an answer.")
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        return _answer(400, "Choose Accept, Decline or Cancel.")
    content = None
    if action == "accept" and found.get("mode") == "form":
        fields = found.get("fields") or []
        content, errors = elicitation.parse(fields, request.POST)
        if not errors:
            errors = elicitation.check(fields, found.get("schema") or {}, content)
        if errors:
            return _answer(400, "Check the highlighted fields.", errors=errors)
    if not elicitation.answer(sync_client(), elicitation_id, action, content):
        return _answer(409, "This question was already answered.")
    return _answer(200, {"accept": "Sent.", "decline": "Declined.", "cancel": "Cancelled."}[action])


def _answer(status: int, message: str, errors: dict[str, str] | None = None) -> JsonResponse:
    body: dict[str, object] = {"ok": status == 200, "message": message}
    if errors:
        body["errors"] = errors
    return JsonResponse(body, status=status)
