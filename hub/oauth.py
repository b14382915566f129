"""Tessera as the OAuth 2.1 authorization server of its own MCP server (`/mcp`), as the MCP
authorization specification describes it. django-oauth-toolkit (DOT) does the protocol; this
module only binds it to Tessera:

- Metadata: protected resource metadata (RFC 9728) for `/mcp`, authorization server metadata
  (RFC 8414); both are DOT's views, with the resource fixed to this server's `/mcp`.
- Clients (hub/oauth_clients.py): dynamic registration (RFC 7591, rate-limited per address)
  and its updates (RFC 7592) under one set of rules, and Client ID Metadata Documents (a
  client_id that is an https URL; DOT resolves it, the document is fetched there through the web
  tool's SSRF checks, within one deadline, a few at once per address). Redirect URIs are https,
  or http on a loopback host for native clients (RFC 8252).
- The consent page (DOT's authorization view with Tessera's template): who asks, where the
  answer goes, what the client will reach; shown every time (a client cannot ask to skip it).
  PKCE S256 is required.
- Resource indicators (RFC 8707): every grant and token is bound to this server's `/mcp`; a
  client asking for another resource is refused (`invalid_target`), and `/mcp` accepts only
  tokens whose audience is itself.
- Tokens: stored hashed (DOT's RFC 9700 storage), refresh tokens rotate, revocation (RFC 7009).
- `/mcp` (hub/caller.py) calls `access_token_for()` for any Bearer token that is not an API
  token; OAuth scopes map onto the API token's: `mcp:tools`, `mcp:agents`, `mcp:approve`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csp import csp_override
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from oauth2_provider.views import (
    AuthorizationView,
    OAuthProtectedResourceMetadataView,
    TokenView,
)

from chat.models import AppSettings
from core.http import is_trusted_proxy
from hub.auth import bad_token, bearer_authenticated

from . import oauth_clients

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
# What a client may reach, as the API token's switches (hub.models.ApiToken).
TOOLS, AGENTS, APPROVE = "mcp:tools", "mcp:agents", "mcp:approve"
SCOPES = {
    TOOLS: "Use your tools: the toolsets you can use in Tessera, with your keys, policies and limits.",
    AGENTS: "Hand tasks to your agents, which run with their own tools as they do in your chats.",
    APPROVE: "Run tools whose policy asks for approval, without asking you each time.",
}
WRONG_RESOURCE = "This server only issues tokens for its own MCP endpoint."


# --- This server as a protected resource ----------------------------------------------------


def use_forwarded_scheme(request: HttpRequest) -> None:
    """Behind a reverse proxy in TESSERA_TRUSTED_PROXIES, the scheme the client used (its
    `X-Forwarded-Proto`, believed from those proxies only, as core/origins.py does for sockets):
    every URL published here (metadata, the resource, the issuer) must be the one clients reach."""
    forwarded = request.META.get("HTTP_X_FORWARDED_PROTO", "").split(",")[0].strip().lower()
    if forwarded not in ("http", "https") or not is_trusted_proxy(request.META.get("REMOTE_ADDR", "")):
        return
    scope = getattr(request, "scope", None)
    if scope is not None:  # ASGIRequest: its scheme is the scope's
        request.scope = {**scope, "scheme": forwarded}  # type: ignore[attr-defined]
    else:  # WSGIRequest (the test client): META is its environ
        request.META["wsgi.url_scheme"] = forwarded


def public(view: Callable[..., HttpResponse], *, always: bool = False) -> Callable[..., HttpResponse]:
    """A view of the authorization server, seeing the scheme the client used; there is nothing
    to authorize while the MCP server is switched off, so it answers 404 then (revoking a token
    still works: `always`). A request naming its client by a metadata document (which may be
    fetched while answering it) waits for no slot: over its address's limit, it is a 429."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not always and not AppSettings.load().mcp_server:
            return JsonResponse({"error": "Tessera's MCP server is switched off on this server."}, status=404)
        use_forwarded_scheme(request)
        with oauth_clients.document_slot(request) as taken:
            if not taken:
                return JsonResponse(
                    {
                        "error": "temporarily_unavailable",
                        "error_description": "Too many client metadata documents are being fetched for "
                        "your address. Try again in a few seconds.",
                    },
                    status=429,
                    headers={"Retry-After": "5"},
                )
            return view(request, *args, **kwargs)

    return wrapped


def resource_url(request: HttpRequest) -> str:
    """This server's `/mcp` as the audience of its tokens: the origin the request came to (its
    Host is checked against ALLOWED_HOSTS), as DOT builds every other metadata URL."""
    return request.build_absolute_uri(MCP_PATH)


def resource_metadata_url(request: HttpRequest) -> str:
    return request.build_absolute_uri("/.well-known/oauth-protected-resource" + MCP_PATH)


def challenge(request: HttpRequest, error: str | None = None) -> str:
    """The `WWW-Authenticate` value of a 401 from `/mcp` (RFC 9728 §5.1, RFC 6750 §3)."""
    parts = [f'resource_metadata="{resource_metadata_url(request)}"']
    if error:
        parts.insert(0, f'error="{error}"')
    return "Bearer " + ", ".join(parts)


class ProtectedResourceMetadata(OAuthProtectedResourceMetadataView):
    """RFC 9728, at the root form and the path-suffixed form: both describe `/mcp`, the one
    resource this server protects with OAuth."""

    def get_resource(self, request: HttpRequest) -> str:
        return resource_url(request)

    def get_resource_name(self) -> str:
        return "Tessera MCP server"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if kwargs.get("resource_path", MCP_PATH.lstrip("/")) != MCP_PATH.lstrip("/"):
            return JsonResponse({"error": "No protected resource here."}, status=404)
        return super().get(request, *args, **kwargs)


# --- Consent ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientFacts:
    """What the consent page and the account page say about a client."""

    name: str
    host: str  # where its metadata lives (a CIMD client) or where the answer goes
    redirect_hosts: list[str]
    verified_by_url: bool


def facts(application: Application, redirect_uri: str | None = None) -> ClientFacts:
    uris = [redirect_uri] if redirect_uri else application.redirect_uris.split()
    hosts = sorted({urlsplit(uri).netloc for uri in uris if urlsplit(uri).netloc})
    by_url = application.registration_source == Application.RegistrationSource.CIMD
    host = urlsplit(application.client_id).netloc if by_url else (hosts[0] if hosts else "")
    return ClientFacts(
        name=(application.name or "").strip() or "An unnamed client",
        host=host,
        redirect_hosts=hosts,
        verified_by_url=by_url,
    )


class Consent(AuthorizationView):
    """DOT's authorization endpoint with Tessera's consent page. The resource is checked here
    (DOT accepts any absolute URI): only this server's `/mcp`, which is also the default for a
    client that does not name one, so that every token is bound to it."""

    template_name = "oauth/authorize.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if "approval_prompt" in request.GET:
            # DOT lets the query's `approval_prompt=auto` skip this page for a client the user
            # allowed before: anyone knowing a client_id could then get a code for their own
            # PKCE challenge sent to a loopback port without the user seeing a thing. Consent
            # is what REQUEST_APPROVAL_PROMPT says (always asked), never what the client asks.
            query = request.GET.copy()
            del query["approval_prompt"]
            query._mutable = False  # as Django hands it over
            request.GET = query  # type: ignore[assignment]
        if request.GET.get("code_challenge_method", "S256") != "S256":
            # DOT refuses "plain" only once the user has allowed it: say so before asking.
            return self._error(request, "invalid_request", 'PKCE with "S256" is required.')
        wanted = request.GET.getlist("resource")
        if any(uri != resource_url(request) for uri in wanted):
            return self._invalid_target(request)
        response = super().get(request, *args, **kwargs)
        data = getattr(self, "oauth2_data", None)
        if data and data.get("redirect_uri"):
            # The answer goes to the client's own origin after the form posts: CSP form-action
            # must let the browser follow that redirect (Chromium enforces it on redirects).
            response = self._allow_form_redirect(response, data["redirect_uri"])
        return response

    def get_initial(self) -> dict[str, Any]:
        initial: dict[str, Any] = super().get_initial()
        initial["resource"] = resource_url(self.request)
        return initial

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        application = context.get("application")
        if application is not None:
            context["client"] = facts(application, context.get("redirect_uri"))
            asked = set(context.get("scopes") or [])
            context["scope_list"] = [
                {"name": scope, "description": description} for scope, description in SCOPES.items() if scope in asked
            ]
            context["mcp_url"] = resource_url(self.request)
        return context

    def form_valid(self, form: Any) -> HttpResponse:
        # The hidden fields come back from the browser: the resource must still name this
        # server, and the client must exist (DOT looks it up without asking).
        if (form.cleaned_data.get("resource") or "").split() != [resource_url(self.request)]:
            return self._invalid_target(self.request)
        if not Application.objects.filter(client_id=form.cleaned_data.get("client_id")).exists():
            return self._error(self.request, "invalid_client", "This app is not known to Tessera.")
        return super().form_valid(form)

    def form_invalid(self, form: Any) -> HttpResponse:
        return self._error(
            self.request, "invalid_request", "The consent form was incomplete. Start again from the app."
        )

    def _invalid_target(self, request: HttpRequest) -> HttpResponse:
        return self._error(request, "invalid_target", WRONG_RESOURCE)

    def _error(self, request: HttpRequest, error: str, description: str) -> HttpResponse:
        return self.render_to_response({"error": {"error": error, "description": description}}, status=400)

    @staticmethod
    def _allow_form_redirect(response: HttpResponse, redirect_uri: str) -> HttpResponse:
        parts = urlsplit(redirect_uri)
        target = f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") else f"{parts.scheme}:"
        config: dict[str, Any] = dict(settings.SECURE_CSP)
        config["form-action"] = [*config["form-action"], target]
        overridden: HttpResponse = csp_override(config)(lambda _request: response)(None)
        return overridden


class Token(TokenView):
    """DOT's token endpoint. Its `invalid_target` answer (RFC 8707) is JSON labelled as HTML:
    every error from here is JSON (RFC 6749 §5.2), so it says so."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().post(request, *args, **kwargs)
        if response.status_code >= 400 and response.content.startswith(b"{"):
            response["Content-Type"] = "application/json"
        return response


# --- Tokens at /mcp --------------------------------------------------------------------------


def _access_token(oauth_token: str, audience: str) -> AccessToken | None:
    checksum = hashlib.sha256(oauth_token.encode()).hexdigest()
    record = AccessToken.objects.select_related("user", "application").filter(token_checksum=checksum).first()
    if (
        record is None
        or record.user is None
        or not record.user.is_active
        or record.application is None
        or record.is_expired()
        # Strict audience: a token bound to another resource, or to none, is not for /mcp.
        or audience not in (record.resource or [])
    ):
        return None
    return record


def access_token_for(request: HttpRequest, token: str) -> AccessToken | None:
    """The access token presented at `/mcp` (hub/caller.py makes it a caller), or None (unknown,
    expired, revoked, another audience, its owner inactive). A valid token always authenticates;
    an invalid one counts against the address like a bad API token."""
    use_forwarded_scheme(request)
    record = _access_token(token, resource_url(request))
    if record is None:
        bad_token(request)
        return None
    bearer_authenticated.send(sender=AccessToken, user_id=record.user_id)
    return record


# --- Connected clients (the account page) ----------------------------------------------------


@dataclass(frozen=True)
class Connection:
    id: int
    client: ClientFacts
    scopes: list[str]
    since: datetime
    expires: datetime | None


def connections(user_id: int) -> list[Connection]:
    """The clients holding a live token of this user's, newest first."""
    now = timezone.now()
    by_app: dict[int, Connection] = {}
    refresh = RefreshToken.objects.filter(user_id=user_id, revoked=None).select_related("application")
    access = AccessToken.objects.filter(user_id=user_id, expires__gt=now).select_related("application")
    for record in [*refresh, *access]:
        application = record.application
        if application is None:
            continue
        scope = record.access_token.scope if isinstance(record, RefreshToken) and record.access_token else ""
        scopes = (getattr(record, "scope", "") or scope).split()
        known = by_app.get(application.pk)
        since = min(record.created, known.since) if known else record.created
        merged = sorted(set(scopes) | set(known.scopes if known else []))
        by_app[application.pk] = Connection(
            application.pk, facts(application), [s for s in SCOPES if s in merged], since, None
        )
    return sorted(by_app.values(), key=lambda c: c.since, reverse=True)


def disconnect(user_id: int, application_id: int) -> bool:
    """Revokes everything this client holds for this user (its next call to /mcp gets a 401).
    False when it holds nothing of this user's."""
    with transaction.atomic():
        refresh = list(RefreshToken.objects.filter(user_id=user_id, application_id=application_id, revoked=None))
        access = AccessToken.objects.filter(user_id=user_id, application_id=application_id)
        grants = Grant.objects.filter(user_id=user_id, application_id=application_id)
        found = bool(refresh) or access.exists() or grants.exists()
        for token in refresh:
            token.revoke()
        access.delete()
        grants.delete()
    return found


def disconnect_all(user_id: int) -> None:
    """Revokes every client's access to this user's account (a new password does)."""
    with transaction.atomic():
        for token in RefreshToken.objects.filter(user_id=user_id, revoked=None):
            token.revoke()
        AccessToken.objects.filter(user_id=user_id).delete()
        Grant.objects.filter(user_id=user_id).delete()
