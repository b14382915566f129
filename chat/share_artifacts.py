"""A shared chat's artifacts, display-only: the versions that existed when the chat was shared
(the assistant's only from the shared turns), shown in the same sandboxed panel as the owner's,
downloadable, never editable. Checked against the share, like its files (chat.shares)."""

from __future__ import annotations

from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from artifacts import views as artifact_views
from artifacts.models import Artifact, ArtifactVersion

from .models import ChatShare
from .shares import _open_share, _visible_without_sign_in


def _scope(request: HttpRequest, token: str, artifact_id: int) -> artifact_views.Scope:
    share: ChatShare = _open_share(token)
    if not request.user.is_authenticated and not _visible_without_sign_in(share):
        raise Http404("No such shared chat.")
    artifact = Artifact.objects.filter(pk=artifact_id, chat_id=share.chat_id).first()
    if artifact is None:
        raise Http404("No such artifact.")
    versions = ArtifactVersion.objects.filter(artifact=artifact, created_at__lte=share.created_at).filter(
        Q(turn_id__isnull=True) | Q(turn_id__in=share.turn_ids)
    )
    if not versions.exists():
        raise Http404("No such artifact.")
    base = reverse("chat:shared_artifact", args=[token, artifact_id])
    return artifact_views.Scope(artifact, versions, base, editable=False)


@require_GET
def panel(request: HttpRequest, token: str, artifact_id: int) -> HttpResponse:
    return artifact_views.panel_response(request, _scope(request, token, artifact_id))


@require_GET
def document(request: HttpRequest, token: str, artifact_id: int) -> JsonResponse:
    return artifact_views.document_response(request, _scope(request, token, artifact_id))


@require_GET
def download(request: HttpRequest, token: str, artifact_id: int) -> HttpResponse:
    return artifact_views.download_response(request, _scope(request, token, artifact_id))
