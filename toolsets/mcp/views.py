"""The user's side of OAuth servers: Connect (to the provider's consent page), the callback, and
Disconnect."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.http import AuthedRequest
from core.redact import redact

from . import oauth
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


# GET, not POST: the browser then leaves for the provider's page by following a link, which
# the page's Content-Security-Policy (form-action 'self') allows; the flow is bound to this
# session by its state, so a forged link can at most show the user a consent page.
@login_required
@require_GET
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
    return HttpResponseRedirect(url)


@login_required
@require_GET
def callback(request: AuthedRequest) -> HttpResponse:
    pending = oauth.take(request.session, request.GET.get("state", ""))
    if pending is None:
        return _failed(request, None, "This sign-in link is not from this browser session (or was used already).")
    server = MCPServer.objects.filter(pk=int(pending.get("server_id") or 0)).first()
    if server is None:
        raise Http404
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
