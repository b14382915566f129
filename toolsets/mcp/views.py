"""The user's side of MCP servers: for OAuth servers Connect (to the provider's consent page),
the callback and Disconnect; for every server, a resource a card links to, read through it."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest
from core.redact import redact
from toolsets import availability
from toolsets.base import ToolFailure

from . import client, oauth
from .catalog import ServerSpec
from .client import describe
from .discovery import refresh
from .models import MCPServer, OAuthGrant

log = logging.getLogger(__name__)


def _server(slug: str) -> MCPServer:
    server = MCPServer.objects.filter(slug=slug, enabled=True, credential=MCPServer.Credential.OAUTH).first()
    if server is None:
        raise Http404
    return server


def _back(server: MCPServer) -> str:
    return reverse("toolsets:settings") + f"#toolset-{server.toolset_id}"


def _failed(request: AuthedRequest, server: MCPServer | None, message: str) -> HttpResponse:
    return render(
        request,
        "toolsets/mcp/connect_failed.html",
        {
            "server": server,
            "message": redact(message),
            "back": _back(server) if server else reverse("toolsets:settings"),
        },
        status=502,
    )


# A POST (CSRF-checked): another site cannot start a flow in the user's name. It is answered
# by a small page that moves on to the provider by itself, not by a redirect: Chrome holds a
# form's redirect to another origin against the page's `form-action 'self'`, and widening
# that policy to every provider an admin may add would weaken it for every form.
@login_required
@require_POST
def connect(request: AuthedRequest, slug: str) -> HttpResponse:
    server = _server(slug)
    redirect_uri = request.build_absolute_uri(reverse("toolsets:mcp_callback"))
    try:
        started = async_to_sync(oauth.start)(ServerSpec.of(server), request.user.pk, redirect_uri)
    except Exception as exc:
        log.info("Starting OAuth with %s failed", server.name, exc_info=True)
        return _failed(request, server, f"Could not start connecting to {server.name}: {describe(exc)}")
    if started is None:
        return HttpResponseRedirect(_back(server))
    url, pending = started
    oauth.remember(request.session, pending)
    return render(request, "toolsets/mcp/connecting.html", {"server": server, "url": url, "back": _back(server)})


@login_required
@require_GET
def callback(request: AuthedRequest) -> HttpResponse:
    pending = oauth.take(request.session, request.GET.get("state", ""))
    if pending is None:
        return _failed(request, None, "This sign-in link is not from this browser session (or was used already).")
    server = MCPServer.objects.filter(pk=int(pending.get("server_id") or 0)).first()
    if server is None:
        raise Http404
    try:
        # Before anything in the response is used or shown (its error text included): a
        # response from another authorization server than the flow's is an attack (RFC 9207).
        oauth.check_issuer(pending, request.GET.get("iss"))
    except Exception:
        return _failed(
            request,
            server,
            f"Could not finish connecting to {server.name}: the answer did not come from the authorization "
            "server Tessera sent you to (its issuer differs), so it was ignored.",
        )
    if request.GET.get("error"):
        text = request.GET.get("error_description") or request.GET["error"]
        return _failed(request, server, f"{server.name} did not authorize Tessera: {text[:300]}")
    code = request.GET.get("code", "")
    if not code:
        return _failed(request, server, "The provider sent no authorization code.")
    try:
        async_to_sync(oauth.finish)(ServerSpec.of(server), request.user.pk, pending, code, request.GET.get("iss"))
    except Exception as exc:
        log.info("Finishing OAuth with %s failed", server.name, exc_info=True)
        return _failed(request, server, f"Could not finish connecting to {server.name}: {describe(exc)}")
    if not server.tools:
        # A server that wants OAuth lists nothing to an anonymous admin: the first user to
        # connect is the first chance to learn its tools.
        refresh(server, request.user.pk, reviewed=False)
    return HttpResponseRedirect(_back(server))


@login_required
@require_POST
def disconnect(request: AuthedRequest, slug: str) -> HttpResponse:
    server = _server(slug)
    OAuthGrant.objects.filter(server=server, user=request.user).update(tokens="", expires_at=None)
    from toolsets.views import _card

    return _card(request, server.toolset_id)


@require_GET
def client_metadata(request: AuthedRequest) -> HttpResponse:
    """Tessera's OAuth Client ID Metadata Document: the URL of this document is Tessera's client
    ID at authorization servers that support them (no registration). Its redirect URI is this
    host's callback, the one Connect sends."""
    callback = request.build_absolute_uri(reverse("toolsets:mcp_callback"))
    document = oauth.client_metadata_document(request.build_absolute_uri(), callback)
    return JsonResponse(document, headers={"Cache-Control": "public, max-age=3600"})


MAX_URI = 2000


@login_required
@require_GET
def resource(request: AuthedRequest, slug: str) -> HttpResponse:
    """A resource a tool linked to (`resource_link`, any URI scheme), read through its server
    with the user's own access: only someone who may use the server's tools may read it."""
    uri = request.GET.get("uri", "")
    if not uri or len(uri) > MAX_URI or not uri.isprintable() or ":" not in uri:
        return _resource_page(request, None, uri[:MAX_URI], "That is not a resource address.", status=400)
    server = MCPServer.objects.filter(slug=slug, enabled=True).first()
    if server is None:
        raise Http404
    state = availability.for_toolset(request.user.pk, server.toolset_id)
    if state is None or not state.usable:
        reason = state.reason if state is not None else "not available"
        return _resource_page(request, server, uri, f"{server.name} is not available to you ({reason}).", status=403)
    try:
        blocks = async_to_sync(client.read_resource)(ServerSpec.of(server), uri, request.user.pk, state.api_key)
    except ToolFailure as exc:
        return _resource_page(request, server, uri, redact(str(exc)), status=502)
    return _resource_page(request, server, uri, "", content={"content": blocks})


def _resource_page(
    request: AuthedRequest,
    server: MCPServer | None,
    uri: str,
    error: str,
    *,
    status: int = 200,
    content: dict[str, object] | None = None,
) -> HttpResponse:
    context = {"server": server, "uri": uri, "error": error, "content": content, "back": reverse("chat:home")}
    return render(request, "toolsets/mcp/resource.html", context, status=status)
