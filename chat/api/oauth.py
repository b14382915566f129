"""Tessera as the OAuth 2.1 authorization server of its own MCP server (`/mcp`), as the MCP
authorization specification describes it. django-oauth-toolkit (DOT) does the protocol; this
module only binds it to Tessera:

- Metadata: protected resource metadata (RFC 9728) for `/mcp`, authorization server metadata
  (RFC 8414); both are DOT's views, with the resource fixed to this server's `/mcp`.
- Clients: dynamic registration (RFC 7591; DOT's view, rate-limited per address here) and Client
  ID Metadata Documents (a client_id that is an https URL; DOT resolves it, the document is
  fetched here through the web tool's SSRF checks). Redirect URIs are https, or http on a
  loopback host for native clients (RFC 8252).
- The consent page (DOT's authorization view with Tessera's template): who asks, where the
  answer goes, what the client will reach. PKCE S256 is required.
- Resource indicators (RFC 8707): every grant and token is bound to this server's `/mcp`; a
  client asking for another resource is refused (`invalid_target`), and `/mcp` accepts only
  tokens whose audience is itself.
- Tokens: stored hashed (DOT's RFC 9700 storage), refresh tokens rotate, revocation (RFC 7009).
- `/mcp` (chat/api/mcp_server.py) calls `caller_for()` for any Bearer token that is not an API
  token; OAuth scopes map onto the API token's: `mcp:tools`, `mcp:agents`, `mcp:approve`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import authenticate
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csp import csp_override
from oauth2_provider import cimd
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from oauth2_provider.views import (
    AuthorizationView,
    DynamicClientRegistrationView,
    OAuthProtectedResourceMetadataView,
    TokenView,
)

from chat.accounts import ratelimit
from chat.models import AppSettings
from core.http import is_trusted_proxy
from toolsets.base import ToolFailure
from toolsets.web import safety

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
# What a client may reach, as the API token's switches (toolsets.models.ApiToken).
TOOLS, AGENTS, APPROVE = "mcp:tools", "mcp:agents", "mcp:approve"
SCOPES = {
    TOOLS: "Use your tools: the toolsets you can use in Tessera, with your keys, policies and limits.",
    AGENTS: "Hand tasks to your agents, which run with their own tools as they do in your chats.",
    APPROVE: "Run tools whose policy asks for approval, without asking you each time.",
}
DOCUMENT_MAX_BYTES = 16 * 1024
FETCH_TIMEOUT = httpx.Timeout(5.0, connect=3.0)
WRONG_RESOURCE = "This server only issues tokens for its own MCP endpoint."
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


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
    still works: `always`)."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not always and not AppSettings.load().mcp_server:
            return JsonResponse({"error": "Tessera's MCP server is switched off on this server."}, status=404)
        use_forwarded_scheme(request)
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


# --- Redirect URIs and client metadata documents ---------------------------------------------


def redirect_uri_problem(uri: str) -> str | None:
    """Why a client may not use this redirect URI, or None: https anywhere; http only to a
    loopback host, where a native client listens (RFC 8252 §7.3, OAuth 2.1 §2.3.1)."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - an out-of-range port raises here
    except ValueError:
        return f"{uri!r} is not a URL"
    if parts.fragment or parts.username or parts.password:
        return f"{uri!r} must not carry a fragment or credentials"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS:
        return None
    return f"{uri!r} must be https, or http on a loopback address (127.0.0.1, [::1], localhost)"


def _address_check(address: safety.IPAddress, port: int) -> str | None:
    # Tests serve metadata documents from this machine; a deployment never does.
    if settings.OAUTH_CIMD_ALLOW_LOOPBACK and address.is_loopback:
        return None
    return safety.default_check(address, port)


def _ssl_context() -> ssl.SSLContext:
    context = httpx.create_ssl_context(trust_env=False)
    if settings.OAUTH_CIMD_CA_FILE:
        context.load_verify_locations(cafile=settings.OAUTH_CIMD_CA_FILE)
    return context


class MetadataFetcher:
    """DOT's CIMD_METADATA_FETCHER: fetches a client's metadata document through the same checks
    as the web fetch tool (toolsets/web/safety.py: every address public, decimal and mapped forms
    normalised, the connection pinned to the checked address), no redirects, a size cap; then
    checks the document's redirect URIs. DOT validates the rest, caches it on the Application
    (by Cache-Control, within its bounds) and backs off after a failure."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        cimd._validate_client_id_url(client_id)  # https, a path, no fragment or credentials
        document, max_age = async_to_sync(self._fetch)(client_id)
        uris = document.get("redirect_uris")
        for uri in uris if isinstance(uris, list) else []:
            problem = redirect_uri_problem(uri) if isinstance(uri, str) else "a redirect URI is not a string"
            if problem:
                raise cimd.CIMDError(problem)
        return document, max_age

    async def _fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        try:
            destination = await safety.check_destination(client_id, check=_address_check)
        except ToolFailure as exc:
            raise cimd.CIMDError(str(exc)) from None
        transport = safety.PinnedTransport(destination, ssl_context=_ssl_context())
        try:
            async with (
                httpx.AsyncClient(
                    transport=transport, timeout=FETCH_TIMEOUT, follow_redirects=False, trust_env=False
                ) as client,
                client.stream("GET", destination.url, headers={"Accept": "application/json"}) as response,
            ):
                if response.status_code != 200:
                    raise cimd.CIMDError(f"the document answered HTTP {response.status_code}")
                media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if media_type != "application/json" and not media_type.endswith("+json"):
                    raise cimd.CIMDError(f"the document is not JSON ({media_type or 'no content type'})")
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > DOCUMENT_MAX_BYTES:
                        raise cimd.CIMDError("the document is larger than 16 KiB")
                cache_control = response.headers.get("cache-control", "")
        except httpx.HTTPError as exc:
            raise cimd.CIMDError(f"the document could not be fetched: {exc or type(exc).__name__}") from None
        try:
            document = json.loads(body)
        except ValueError:
            raise cimd.CIMDError("the document is not valid JSON") from None
        if not isinstance(document, dict):
            raise cimd.CIMDError("the document is not a JSON object")
        return document, cimd._effective_max_age(cache_control)


# --- Registration ----------------------------------------------------------------------------


class Registration(DynamicClientRegistrationView):
    """RFC 7591, open to anyone (a client registers before anyone signs in; nothing is reached
    until a user consents), a few registrations per address an hour, and redirect URIs held to
    the same rule as metadata documents'."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        address = ratelimit.client_address(request)
        if not ratelimit.allow("oauth-register", address, settings.OAUTH_REGISTRATIONS_PER_HOUR):
            return _registration_error("Too many registrations from your address. Try again in an hour.", 429)
        try:
            data = json.loads(request.body or b"{}")
        except ValueError:
            data = None  # DOT answers a body that is not JSON itself
        if isinstance(data, dict):
            uris = data.get("redirect_uris")
            if not isinstance(uris, list) or not uris:
                return _registration_error("redirect_uris must be a non-empty array.", 400, "invalid_redirect_uri")
            for uri in uris:
                problem = redirect_uri_problem(uri) if isinstance(uri, str) else "a redirect URI is not a string"
                if problem:
                    return _registration_error(problem, 400, "invalid_redirect_uri")
            # An MCP client signs a user in: the code flow, and refreshing what it got.
            grants = data.get("grant_types", ["authorization_code"])
            if not isinstance(grants, list) or not set(grants) <= {"authorization_code", "refresh_token"}:
                return _registration_error("grant_types may only be authorization_code and refresh_token.", 400)
            responses = data.get("response_types", ["code"])
            if not isinstance(responses, list) or not set(responses) <= {"code"}:
                return _registration_error("response_types may only be code.", 400)
            name = data.get("client_name")
            if name is not None and (not isinstance(name, str) or len(name) > 255):
                return _registration_error("client_name must be a string of at most 255 characters.", 400)
        return super().post(request, *args, **kwargs)


def _registration_error(description: str, status: int, error: str = "invalid_client_metadata") -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


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


class OAuthTokenBackend:
    """OAuth access tokens as an authentication backend, like API tokens (toolsets/auth.py), so
    that every failure is counted by the sign-in throttle and a locked-out address is refused."""

    def authenticate(
        self, request: HttpRequest | None, oauth_token: str | None = None, audience: str | None = None, **_: Any
    ) -> Any:
        if oauth_token is None or audience is None:
            return None
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
        if request is not None:
            request.oauth_token = record  # type: ignore[attr-defined]
        return record.user

    def get_user(self, user_id: int) -> None:
        return None  # a token never starts a session


def caller_for(request: HttpRequest, token: str) -> dict[str, Any] | None:
    """The `/mcp` caller for an OAuth access token, as for an API token (chat/api/mcp_server.py),
    or None (unknown, expired, revoked, another audience, its owner inactive, locked out)."""
    use_forwarded_scheme(request)
    if authenticate(request, oauth_token=token, audience=resource_url(request)) is None:
        return None
    record: AccessToken = request.oauth_token  # type: ignore[attr-defined]
    scopes = set(record.scope.split())
    name = facts(record.application).name
    return {
        "user_id": record.user_id,
        "can_approve": APPROVE in scopes,
        "token_id": None,
        "token_name": f"OAuth client {name}",
        "oauth_client": name,
        "tools": TOOLS in scopes,
        "agents": AGENTS in scopes,
    }


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
