"""The Knowledge pages: a user's bases and those shared with them; a base's documents with their
progress (polled by htmx while any is unfinished); uploads; sharing; deleting; reading a
document with a passage marked. Every lookup goes through `access`: another user's base is a
404 exactly like a missing one, and a shared base can be read but only its owner changes it."""

from __future__ import annotations

import unicodedata
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core import groups as member_groups
from core import ratelimit
from core.http import AuthedRequest
from core.redact import redact
from toolsets.files.models import FileLimits
from toolsets.sources import safe_http_url

from . import access, ingest, mcp_sources, refresh
from .models import Chunk, Document, KnowledgeBase, RetrievalSettings

MAX_UPLOAD_FILES = 50
MAX_NAME = 120
REFRESHES_PER_MINUTE = 10
# Listing a server's resources asks the server (its answer is cached by its hints).
LISTS_PER_MINUTE = 20


def _base_for_user(request: AuthedRequest, base_id: int) -> KnowledgeBase:
    return get_object_or_404(access.visible(request.user.pk), pk=base_id)


def _own_base(request: AuthedRequest, base_id: int) -> KnowledgeBase:
    return get_object_or_404(access.owned(request.user.pk), pk=base_id)


@login_required
@require_GET
def index(request: AuthedRequest) -> HttpResponse:
    return render(request, "knowledge/index.html", _index_context(request))


def _index_context(request: AuthedRequest, **extra: object) -> dict[str, object]:
    bases = (
        access.visible(request.user.pk)
        .select_related("owner")
        .annotate(
            document_total=Count("documents", distinct=True),
            ready_total=Count("documents", filter=Q(documents__status=Document.Status.READY), distinct=True),
        )
    )
    return {"bases": bases, "name": "", "description": "", **extra}


def _line(text: str) -> str:
    # One line of text: control characters (NUL, which PostgreSQL refuses, among them) become spaces.
    return " ".join("".join(" " if unicodedata.category(c)[0] == "C" else c for c in text).split())


@login_required
@require_POST
def create(request: AuthedRequest) -> HttpResponse:
    name = _line(request.POST.get("name", ""))[:MAX_NAME]
    description = _line(request.POST.get("description", ""))[:500]
    error = "" if name else "Give the knowledge base a name."
    if not error:
        try:
            with transaction.atomic():
                base = KnowledgeBase.objects.create(owner=request.user, name=name, description=description)
        except IntegrityError:
            error = f"You already have a knowledge base called “{name}”."
        else:
            return HttpResponseRedirect(reverse("knowledge:base", args=[base.pk]))
    context = _index_context(request, error=error, name=name, description=description)
    return render(request, "knowledge/index.html", context, status=400)


def _base_context(request: AuthedRequest, base: KnowledgeBase, **extra: object) -> dict[str, object]:
    documents = list(base.documents.all())
    total = len(documents)
    done = sum(d.finished for d in documents)
    progress = sum(1.0 if d.finished else d.progress for d in documents) / total if total else 1.0
    mine = base.owner_id == request.user.pk
    return {
        "base": base,
        "documents": documents,
        "total": total,
        "done": done,
        "ready": sum(d.status == Document.Status.READY for d in documents),
        "failed": sum(d.status == Document.Status.FAILED for d in documents),
        "percent": round(progress * 100),
        "working": done < total,
        "mine": mine,
        "groups": _group_choices(request, base) if mine else [],
        "mcp_servers": mcp_sources.usable_servers(request.user.pk) if mine else [],
        "mcp_documents": sum(d.source == Document.Source.MCP for d in documents),
        "refresh_minutes": RetrievalSettings.load().mcp_refresh_minutes,
        # Checked after this: "just now" rather than "0 minutes ago".
        "just_now": timezone.now() - timedelta(minutes=1),
        "limits": FileLimits.load(),
        **extra,
    }


def _group_choices(request: AuthedRequest, base: KnowledgeBase) -> list[tuple[Group, bool]]:
    # An owner shares with the groups they are in (an admin with any): never with a group they
    # cannot see into.
    chosen = set(base.groups.values_list("pk", flat=True))
    groups = Group.objects.order_by("name")
    if not request.user.is_superuser:
        groups = groups.filter(Q(pk__in=member_groups.of_user(request.user.pk)) | Q(pk__in=chosen))
    return [(group, group.pk in chosen) for group in groups]


@login_required
@require_GET
def base(request: AuthedRequest, base_id: int) -> HttpResponse:
    found = _base_for_user(request, base_id)
    return render(request, "knowledge/base.html", _base_context(request, found))


@login_required
@require_GET
def documents(request: AuthedRequest, base_id: int) -> HttpResponse:
    """The documents table alone: what the page polls while indexing runs."""
    found = _base_for_user(request, base_id)
    return render(request, "knowledge/_documents.html", _base_context(request, found))


@login_required
@require_POST
def upload(request: AuthedRequest, base_id: int) -> HttpResponse:
    found = _own_base(request, base_id)
    if not ratelimit.allow(
        "knowledge.upload", request.user.pk, settings.UPLOADS_PER_MINUTE, window_s=60, zero_is_unlimited=True
    ):
        return _upload_refused(request, found, "Too many uploads this minute; wait a little and try again.", 429)
    files = request.FILES.getlist("files")
    if not files:
        return _upload_refused(request, found, "Choose one or more files to add.")
    if len(files) > MAX_UPLOAD_FILES:
        return _upload_refused(request, found, f"Add at most {MAX_UPLOAD_FILES} files at once (or a zip of them).")
    limits = FileLimits.load()
    too_big = [f.name for f in files if (f.size or 0) > limits.max_file_bytes]
    if too_big:
        return _upload_refused(request, found, f"“{too_big[0]}” is larger than {limits.max_file_mb} MB.", 413)
    added = unchanged = 0
    with transaction.atomic():
        for upload_file in files:
            data = upload_file.read(limits.max_file_bytes + 1)
            if not data:
                continue
            _, queued = ingest.add(found, upload_file.name or "document", data)
            added += queued
            unchanged += not queued
    notice = f"Added {added} document{'s' if added != 1 else ''}."
    if unchanged:
        notice += f" {unchanged} unchanged, not read again."
    if request.htmx:
        return render(request, "knowledge/base.html", _base_context(request, found, notice=notice))
    return HttpResponseRedirect(reverse("knowledge:base", args=[found.pk]) + "?added=" + str(added))


@login_required
@require_POST
def add_page(request: AuthedRequest, base_id: int) -> HttpResponse:
    found = _own_base(request, base_id)
    url = safe_http_url(request.POST.get("url", ""))
    if not url or len(url) > 1000:
        return _upload_refused(request, found, "Give the page's full address, starting with https:// or http://.")
    try:
        with transaction.atomic():
            ingest.add_page(found, url)
    except ValueError as exc:
        return _upload_refused(request, found, str(exc))
    return HttpResponseRedirect(reverse("knowledge:base", args=[found.pk]))


@login_required
@require_POST
def add_resource(request: AuthedRequest, base_id: int) -> HttpResponse:
    """One resource typed in, or several picked from the server's list (`resource_list`)."""
    found = _own_base(request, base_id)
    uris = request.POST.getlist("uri")
    try:
        with transaction.atomic():
            ingest.add_resources(found, request.user.pk, request.POST.get("server", ""), uris)
    except ValueError as exc:
        return _upload_refused(request, found, str(exc))
    return HttpResponseRedirect(reverse("knowledge:base", args=[found.pk]))


@login_required
@require_GET
def resource_list(request: AuthedRequest, base_id: int) -> HttpResponse:
    """The resources the chosen server lists, to pick from (the base page's "List resources").
    The server is asked as this user; what it says is shown as text, never as markup."""
    found = _own_base(request, base_id)
    if not ratelimit.allow("knowledge.resource_list", request.user.pk, LISTS_PER_MINUTE, window_s=60):
        return HttpResponse("Listed often this minute already; wait a little.", status=429)
    try:
        server, listed, problems = mcp_sources.listed(request.user.pk, request.GET.get("server", ""))
    except ValueError as exc:
        return HttpResponse(str(exc), status=400)
    context = {"base": found, "server": server, "resources": listed, "problems": [redact(p) for p in problems]}
    return render(request, "knowledge/_resource_list.html", context)


@login_required
@require_POST
def refresh_resources(request: AuthedRequest, base_id: int) -> HttpResponse:
    """The owner's "Refresh now": the base's MCP documents are read again (unchanged ones keep
    their passages; knowledge.refresh)."""
    found = _own_base(request, base_id)
    if not ratelimit.allow("knowledge.refresh", request.user.pk, REFRESHES_PER_MINUTE, window_s=60):
        return _upload_refused(request, found, "Refreshed often this minute already; wait a little.", 429)
    queued = refresh.refresh_base(found)
    if queued:
        notice = f"Checking {queued} MCP resource{'s' if queued != 1 else ''} again."
    elif found.documents.filter(source=Document.Source.MCP).exists():
        notice = "Nothing to check: every MCP resource of this base is being read already."
    else:
        notice = "This base has no documents from MCP resources."
    return render(request, "knowledge/base.html", _base_context(request, found, notice=notice))


def _upload_refused(request: AuthedRequest, found: KnowledgeBase, message: str, status: int = 400) -> HttpResponse:
    return render(request, "knowledge/base.html", _base_context(request, found, error=message), status=status)


@login_required
@require_POST
def share(request: AuthedRequest, base_id: int) -> HttpResponse:
    found = _own_base(request, base_id)
    allowed = {group.pk for group, _ in _group_choices(request, found)}
    try:
        picked = {int(value) for value in request.POST.getlist("groups")}
    except ValueError:
        picked = {-1}
    if not picked <= allowed:
        return render(
            request,
            "knowledge/base.html",
            _base_context(request, found, error="You can share only with groups you belong to."),
            status=400,
        )
    found.groups.set(picked)
    return render(request, "knowledge/base.html", _base_context(request, found, notice="Sharing saved."))


@login_required
@require_POST
def delete_base(request: AuthedRequest, base_id: int) -> HttpResponse:
    found = _own_base(request, base_id)
    found.delete()  # documents and chunks cascade; the index's triggers drop every passage
    return HttpResponseRedirect(reverse("knowledge:index"))


@login_required
@require_POST
def delete_document(request: AuthedRequest, document_id: int) -> HttpResponse:
    document = get_object_or_404(Document.objects.filter(base__owner=request.user), pk=document_id)
    base_id = document.base_id
    document.delete()
    if request.htmx:
        return render(request, "knowledge/_documents.html", _base_context(request, _own_base(request, base_id)))
    return HttpResponseRedirect(reverse("knowledge:base", args=[base_id]))


@login_required
@require_GET
def document(request: AuthedRequest, document_id: int) -> HttpResponse:
    """A document's passages in order, the one a citation points to marked. Text is escaped as it
    is shown: an HTML document's markup never reaches the page."""
    found = get_object_or_404(access.visible_documents(request.user.pk).select_related("base"), pk=document_id)
    try:
        marked = int(request.GET.get("passage", "0"))
    except ValueError:
        marked = 0
    chunks = Chunk.objects.filter(document=found).order_by("position")
    return render(request, "knowledge/document.html", {"document": found, "chunks": chunks, "marked": marked})
