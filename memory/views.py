"""The account page's Memory section: the user sees, adds, edits, deletes and exports what the
assistant remembers about them, and turns memory off or on. Every view reads and writes only
the signed-in user's memories (memory.store): another user's id is a 404."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest

from . import store

PARTIAL = "memory/_memories.html"


def context(user_id: int, **extra: Any) -> dict[str, Any]:
    """The section's context, for the account page and for each answer that redraws it."""
    return {"memories": store.listing(user_id), "memory_on": store.is_enabled(user_id), **extra}


def _redraw(request: AuthedRequest, status: int = 200, **extra: Any) -> HttpResponse:
    return render(request, PARTIAL, context(request.user.pk, **extra), status=status)


@login_required
@require_POST
def add(request: AuthedRequest) -> HttpResponse:
    try:
        store.save(request.user.pk, request.POST.get("text", ""))
    except store.Refused as refused:
        return _redraw(request, 400, memory_error=str(refused))
    return _redraw(request, memory_notice="Saved.")


@login_required
@require_POST
def edit(request: AuthedRequest, memory_id: int) -> HttpResponse:
    try:
        store.update(request.user.pk, memory_id, request.POST.get("text", ""))
    except store.Refused as refused:
        if str(refused) == store.NOT_FOUND:
            raise Http404(store.NOT_FOUND) from refused
        return _redraw(request, 400, memory_error=str(refused))
    return _redraw(request, memory_notice="Saved.")


@login_required
@require_POST
def delete(request: AuthedRequest, memory_id: int) -> HttpResponse:
    try:
        store.forget(request.user.pk, memory_id)
    except store.Refused as refused:
        raise Http404(store.NOT_FOUND) from refused
    return _redraw(request, memory_notice="Deleted.")


@login_required
@require_POST
def switch(request: AuthedRequest) -> HttpResponse:
    on = request.POST.get("enabled") in ("1", "on", "true")
    store.set_enabled(request.user.pk, on)
    return _redraw(request, memory_notice="Memory is on." if on else "Memory is off: nothing is saved or offered.")


@login_required
@require_GET
def export(request: AuthedRequest, kind: str) -> HttpResponse:
    """Everything remembered, as JSON (to keep or move) or Markdown (to read)."""
    memories = store.listing(request.user.pk)
    stamp = timezone.now().strftime("%Y-%m-%d")
    if kind == "json":
        rows = [
            {"id": m.pk, "text": m.text, "created": m.created_at.isoformat(), "updated": m.updated_at.isoformat()}
            for m in memories
        ]
        body = json.dumps({"memories": rows}, ensure_ascii=False, indent=2)
        response = HttpResponse(body, content_type="application/json; charset=utf-8")
    elif kind == "md":
        lines = ["# What Tessera remembers about you", ""]
        # A memory is plain text: escaped so its Markdown stays one list item.
        lines += [f"- {_markdown_text(m.text)} *(saved {m.updated_at.date().isoformat()})*" for m in memories]
        if not memories:
            lines.append("Nothing.")
        response = HttpResponse("\n".join(lines) + "\n", content_type="text/markdown; charset=utf-8")
    else:
        raise Http404("No such export.")
    response["Content-Disposition"] = f'attachment; filename="tessera-memories-{stamp}.{kind}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _markdown_text(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!<>|" else c for c in text)
