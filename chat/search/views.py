from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.http import AuthedRequest

from . import query, service


@login_required
@require_GET
def search(request: AuthedRequest) -> HttpResponse:
    """The sidebar asks for the results fragment as the person types; without JavaScript (or
    on Enter with no result to open) the same results come as a page."""
    raw = request.GET.get("q", "").replace("\x00", "")[: query.MAX_QUERY]
    words = query.terms(raw)
    context = {"q": raw, "words": words, "results": service.find(request.user.pk, words) if words else []}
    if request.htmx:
        return render(request, "chatsearch/_results.html", context)
    return render(request, "chatsearch/page.html", context)
