"""Chats in bulk: the manage page (select to export or delete several at once) and the exports."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest

from . import export, live
from .models import Chat, Turn

PER_PAGE = 50
MAX_SELECTED = 500


@login_required
@require_GET
def manage(request: AuthedRequest) -> HttpResponse:
    chats = (
        Chat.objects.filter(owner=request.user, listed=True)
        .annotate(
            message_count=Count("messages", filter=Q(messages__lane="", messages__role__in=["user", "assistant"]))
        )
        .only("id", "title", "updated_at")
        .order_by("-updated_at", "-id")
    )
    page = Paginator(chats, PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "chat/manage.html", {"page": page})


def _selected(request: AuthedRequest) -> list[int] | None:
    ids: list[int] = []
    for value in request.POST.getlist("chats"):
        if not value.isascii() or not value.isdigit() or len(value) > 18:
            return None
        ids.append(int(value))
    return sorted(set(ids))


@login_required
@require_POST
def delete_many(request: AuthedRequest) -> HttpResponse:
    """First POST: the confirmation page listing what would go. Second POST (confirm=yes):
    the chats are deleted. Only the user's own chats are ever listed or deleted."""
    ids = _selected(request)
    if ids is None:
        return HttpResponse("Which chats? Chat ids are whole numbers.", status=400)
    if len(ids) > MAX_SELECTED:
        return HttpResponse(f"Select at most {MAX_SELECTED} chats at once.", status=400)
    chats = Chat.objects.filter(owner=request.user, pk__in=ids)
    if not ids or not chats.exists():
        messages.error(request, "Select at least one chat to delete.")
        return redirect("chat:manage")
    if request.POST.get("confirm") != "yes":
        return render(request, "chat/manage_confirm.html", {"chats": chats.only("id", "title")})
    with transaction.atomic():
        doomed = list(chats.select_for_update().values_list("pk", flat=True))
        running = list(Turn.objects.filter(chat_id__in=doomed, status=Turn.Status.RUNNING).values_list("pk", flat=True))
        for turn_id in running:
            live.request_cancel(turn_id)
        Chat.objects.filter(pk__in=doomed).delete()
    messages.success(request, f"Deleted {len(doomed)} chat{'s' if len(doomed) != 1 else ''}.")
    return redirect("chat:manage")


def _download(body: str, name: str, content_type: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, name)
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_GET
def export_markdown(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = get_object_or_404(Chat.objects.select_related("model"), pk=chat_id, owner=request.user)
    body = export.as_markdown(chat, export.transcript(chat))
    return _download(body, export.filename(chat, "md"), "text/markdown; charset=utf-8")


@login_required
@require_GET
def export_json(request: AuthedRequest, chat_id: int) -> HttpResponse:
    chat = get_object_or_404(Chat.objects.select_related("model"), pk=chat_id, owner=request.user)
    body = export.as_json(chat, export.transcript(chat))
    return _download(body, export.filename(chat, "json"), "application/json; charset=utf-8")
