from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest

from . import service
from .models import Notification

PAGE = 50


@login_required
@require_GET
def centre(request: AuthedRequest) -> HttpResponse:
    notes = list(Notification.objects.filter(user=request.user)[:PAGE])
    return render(
        request, "notifications/centre.html", {"notes": notes, "unread": service.unread_count(request.user.pk)}
    )


@login_required
@require_POST
def open_note(request: AuthedRequest, note_id: int) -> HttpResponse:
    """Marks it read and follows its link (a path inside Tessera only)."""
    note = get_object_or_404(Notification, pk=note_id, user=request.user)
    if not note.read:
        Notification.objects.filter(pk=note.pk).update(read=True)
        service.push_count(request.user.pk)
    safe = note.url and url_has_allowed_host_and_scheme(note.url, allowed_hosts=None) and note.url.startswith("/")
    return HttpResponseRedirect(note.url if safe else "/notifications/")


@login_required
@require_POST
def read_all(request: AuthedRequest) -> HttpResponse:
    Notification.objects.filter(user=request.user, read=False).update(read=True)
    service.push_count(request.user.pk)
    return HttpResponseRedirect("/notifications/")
