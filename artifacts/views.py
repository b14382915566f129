"""The artifact panel beside a chat, for the chat's owner: a version shown in its sandboxed frame,
the list of versions, the editor (a save is a new version by the user) and downloads.

The same responses serve a shared chat (chat.share_artifacts), display-only: `Scope` says which
versions a viewer sees, where its URLs start, and whether it may edit."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest
from toolsets.mcp import app_sandbox

from . import render, store
from .models import Artifact, ArtifactVersion


@dataclass(frozen=True)
class Scope:
    artifact: Artifact
    versions: QuerySet[ArtifactVersion]
    base: str  # the artifact's URL, ending in "/"
    editable: bool


def _number(request: HttpRequest) -> int | None:
    raw = request.GET.get("v", "")
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 9:
        raise Http404("No such version.")
    return int(raw)


def _version(scope: Scope, number: int | None) -> ArtifactVersion:
    found = scope.versions.filter(number=number).first() if number else scope.versions.order_by("-number").first()
    if found is None:
        raise Http404("No such version.")
    return found


def panel_response(
    request: HttpRequest,
    scope: Scope,
    *,
    number: int | None = None,
    error: str = "",
    status: int = 200,
    draft: str | None = None,
) -> HttpResponse:
    version = _version(scope, number if number is not None else _number(request))
    # Tessera's own documents get an origin of their own: no server's slug is empty.
    origin = app_sandbox.sandbox_origin(request, "")
    context = {
        "artifact": scope.artifact,
        "version": version,
        "versions": list(scope.versions.order_by("-number").only("number", "author", "created_at")),
        "base": scope.base,
        "editable": scope.editable,
        "error": error,
        "draft": version.content if draft is None else draft,
        "sandbox_url": app_sandbox.proxy_url(request, {}, origin),
        "sandbox_origin": origin,
    }
    return HttpResponse(render_to_string("artifacts/_panel.html", context, request), status=status)


def document_response(request: HttpRequest, scope: Scope) -> JsonResponse:
    version = _version(scope, _number(request))
    theme = request.GET.get("theme", "")
    html = render.document(scope.artifact, version.content, theme if theme in ("light", "dark") else "")
    return JsonResponse({"html": html, "mermaid": scope.artifact.kind == Artifact.Kind.MERMAID})


def download_response(request: HttpRequest, scope: Scope) -> HttpResponse:
    version = _version(scope, _number(request))
    stem = "".join(c if c.isalnum() or c in "-_ " else "-" for c in scope.artifact.title).strip() or "artifact"
    name = f"{stem[:80]}-v{version.number}.{render.extension(scope.artifact)}"
    response = HttpResponse(
        version.content.encode(), content_type=f"{render.CONTENT_TYPES[scope.artifact.kind]}; charset=utf-8"
    )
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name, safe='')}"
    # Saved, never shown on Tessera's origin: an HTML artifact opened here would be its page.
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, no-store"
    return response


def _owned(request: AuthedRequest, chat_id: int, artifact_id: int) -> Scope:
    artifact = Artifact.objects.filter(
        pk=artifact_id, chat_id=chat_id, owner_id=request.user.pk, chat__owner_id=request.user.pk
    ).first()
    if artifact is None:
        raise Http404("No such artifact.")
    base = reverse("artifacts:panel", args=[chat_id, artifact_id])
    return Scope(artifact, artifact.versions.all(), base, editable=True)


@login_required
@require_GET
def panel(request: AuthedRequest, chat_id: int, artifact_id: int) -> HttpResponse:
    return panel_response(request, _owned(request, chat_id, artifact_id))


@login_required
@require_GET
def document(request: AuthedRequest, chat_id: int, artifact_id: int) -> JsonResponse:
    return document_response(request, _owned(request, chat_id, artifact_id))


@login_required
@require_GET
def download(request: AuthedRequest, chat_id: int, artifact_id: int) -> HttpResponse:
    return download_response(request, _owned(request, chat_id, artifact_id))


@login_required
@require_POST
def save(request: AuthedRequest, chat_id: int, artifact_id: int) -> HttpResponse:
    """The user's edit: a new version by them (the model reads it with read_artifact)."""
    scope = _owned(request, chat_id, artifact_id)
    content = request.POST.get("content", "").replace("\r\n", "\n")
    base = request.POST.get("base", "")
    if not base.isdigit() or len(base) > 9:
        return panel_response(request, scope, error="The edit names no version.", status=400, draft=content)
    try:
        change = store.revise(scope.artifact, content=content, author=ArtifactVersion.Author.USER, base=int(base))
    except store.Refused as exc:
        return panel_response(request, scope, number=int(base), error=str(exc), status=400, draft=content)
    return panel_response(request, scope, number=change.version.number)
