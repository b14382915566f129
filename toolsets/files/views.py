"""Uploading, previewing and downloading attached files. Every view finds the file through
`_get_file_for_user`: another user's id is a 404, exactly like one that does not exist."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from core import ratelimit
from core.http import AuthedRequest

from . import attach
from .detect import DOCX_TYPE, Refused
from .models import Attachment, FileLimits

PREVIEW_CHARS = 200_000
# What a download is labelled as: never HTML or SVG, whatever the file holds (it is also sent
# as an attachment, with nosniff and a sandboxing policy).
DOWNLOAD_TYPES = {
    "pdf": "application/pdf",
    "docx": DOCX_TYPE,
    "text": "text/plain; charset=utf-8",
    "markdown": "text/plain; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "json": "application/json",
}
INLINE_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def _get_file_for_user(request: AuthedRequest, file_id: int) -> Attachment:
    return get_object_or_404(Attachment, pk=file_id, owner=request.user)


def _locked_down(response: HttpResponseBase) -> HttpResponseBase:
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, max-age=0, no-store"
    return response


def file_json(attachment: Attachment) -> dict[str, Any]:
    return {
        "id": attachment.pk,
        "name": attachment.name,
        "size": attachment.size,
        "size_label": attach.size_label(attachment.size),
        "kind": attachment.kind,
        "kind_label": attachment.get_kind_display(),
        "status": attachment.status,
        "error": attachment.error,
        "thumbnail_url": reverse("files:thumbnail", args=[attachment.pk]) if attachment.has_thumbnail else "",
        "status_url": reverse("files:status", args=[attachment.pk]),
        "delete_url": reverse("files:delete", args=[attachment.pk]),
        "preview_url": reverse("files:preview", args=[attachment.pk]),
    }


def _refused(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@csrf_exempt  # checked below, once the size check is in place: the CSRF check parses the body
@login_required
@require_POST
def upload(request: AuthedRequest) -> HttpResponse:
    limits = FileLimits.load()
    # Before the body is parsed: a refused upload costs the web process nothing more. (A request
    # from another site carries no session cookie here: SameSite keeps it from counting.)
    if not ratelimit.allow(
        "files.upload", request.user.pk, settings.UPLOADS_PER_MINUTE, window_s=60, zero_is_unlimited=True
    ):
        per_minute = settings.UPLOADS_PER_MINUTE
        return _refused(
            f"You uploaded {per_minute} files in the last minute, the most Tessera takes; try again in a minute.", 429
        )
    if not request.META.get("CONTENT_LENGTH"):
        # Django parses no multipart body without a length (a chunked upload would arrive empty).
        return _refused("An upload must say how large it is (a Content-Length header).", 411)
    # The file is counted while the body is parsed, before it is written anywhere; an unsized or
    # chunked body was already capped as it arrived (core.asgi.BodyLimit).
    size_limit = attach.SizeLimit(limits.max_file_bytes, request)
    request.upload_handlers.insert(0, size_limit)
    return _upload(request, limits, size_limit)


@csrf_protect
def _upload(request: AuthedRequest, limits: FileLimits, size_limit: attach.SizeLimit) -> HttpResponse:
    try:
        attach.check_declared_size(request.META.get("CONTENT_LENGTH"), limits)
        uploads = request.FILES.getlist("file")
        if size_limit.exceeded:
            mb = limits.max_file_mb
            raise attach.TooLarge(f"“{size_limit.name}” is larger than {mb} MB; a file can be at most {mb} MB.")
        if len(uploads) != 1:
            return _refused("Send one file per upload, in the field “file”.")
        attachment = attach.accept(request.user.pk, uploads[0], limits)
    except attach.TooLarge as exc:
        return _refused(str(exc), 413)
    except Refused as exc:
        return _refused(str(exc), 415 if "supported" in str(exc) or "recognised" in str(exc) else 400)
    return JsonResponse(file_json(attachment), status=201)


@login_required
@require_GET
def status(request: AuthedRequest, file_id: int) -> HttpResponse:
    attachment = get_object_or_404(Attachment.objects.defer("text", "thumbnail"), pk=file_id, owner=request.user)
    return JsonResponse(file_json(attachment))


@login_required
@require_POST
def delete(request: AuthedRequest, file_id: int) -> HttpResponse:
    """Removes a file not sent yet (its chip's remove button); a sent file goes with its chat."""
    attachment = _get_file_for_user(request, file_id)
    if attachment.message_id is not None:
        return _refused("This file belongs to a sent message; delete the chat to delete it.", 409)
    attachment.delete()
    return HttpResponse(status=204)


@login_required
@require_GET
def download(request: AuthedRequest, file_id: int) -> HttpResponseBase:
    return as_download(_get_file_for_user(request, file_id))


def as_download(attachment: Attachment) -> HttpResponseBase:
    """The file's bytes as a download, locked down (also a shared chat's files, chat/shares.py)."""
    content_type = (
        attachment.content_type if attachment.kind == "image" and attachment.content_type in INLINE_IMAGES else None
    ) or DOWNLOAD_TYPES.get(attachment.kind, "application/octet-stream")
    response = FileResponse(
        attachment.file.open("rb"), as_attachment=True, filename=attachment.name, content_type=content_type
    )
    return _locked_down(response)


@login_required
@require_GET
def thumbnail(request: AuthedRequest, file_id: int) -> HttpResponse:
    attachment = _get_file_for_user(request, file_id)
    if not attachment.thumbnail:
        return HttpResponse("This file has no thumbnail.", status=404, content_type="text/plain")
    # Made by Tessera from the decoded pixels (WebP), never the uploaded bytes.
    response = HttpResponse(bytes(attachment.thumbnail), content_type="image/webp")
    _locked_down(response)
    response["Cache-Control"] = "private, max-age=86400"
    return response


@login_required
@require_GET
def image(request: AuthedRequest, file_id: int) -> HttpResponseBase:
    """An image, shown in its preview page: only one Pillow has read as PNG, JPEG, GIF or WebP."""
    attachment = _get_file_for_user(request, file_id)
    if (
        not attachment.is_image
        or attachment.status != Attachment.Status.READY
        or attachment.content_type not in INLINE_IMAGES
    ):
        return HttpResponse("Not an image.", status=404, content_type="text/plain")
    response = FileResponse(attachment.file.open("rb"), content_type=attachment.content_type)
    return _locked_down(response)


@login_required
@require_GET
def preview(request: AuthedRequest, file_id: int) -> HttpResponse:
    """The file's text, page by page, with the passage a citation points to marked."""
    attachment = _get_file_for_user(request, file_id)
    mark = _range(request.GET.get("from"), request.GET.get("to"), len(attachment.text))
    return render(request, "files/preview.html", {"file": attachment, "pages": _pages(attachment, mark), "mark": mark})


def _range(start: str | None, end: str | None, length: int) -> tuple[int, int] | None:
    try:
        begin, finish = int(start or ""), int(end or "")
    except ValueError:
        return None
    if not 0 <= begin < finish <= length:
        return None
    return begin, finish


def _pages(attachment: Attachment, mark: tuple[int, int] | None) -> list[dict[str, Any]]:
    """The pages to show (as text pieces, the marked passage apart), at most PREVIEW_CHARS of
    text around the mark."""
    text = attachment.text
    if attachment.status != Attachment.Status.READY or attachment.is_image:
        return []
    starts = list(attachment.page_starts or [0])
    focus = mark[0] if mark else 0
    window_start = max(0, focus - PREVIEW_CHARS // 2) if len(text) > PREVIEW_CHARS else 0
    window_end = min(len(text), window_start + PREVIEW_CHARS)
    pages = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        if end <= window_start or start >= window_end:
            continue
        begin, finish = max(start, window_start), min(end, window_end)
        pieces = []
        if mark and begin < mark[1] and mark[0] < finish:
            cut_a, cut_b = max(begin, mark[0]), min(finish, mark[1])
            pieces = [(text[begin:cut_a], False), (text[cut_a:cut_b], True), (text[cut_b:finish], False)]
        else:
            pieces = [(text[begin:finish], False)]
        pages.append({"number": index + 1, "pieces": pieces, "cut_before": begin > start, "cut_after": finish < end})
    return pages
