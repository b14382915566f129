"""MCP authorization (OAuth 2.1 with PKCE and dynamic client registration) for a web app.

The SDK's `OAuthClientProvider` runs the whole flow inside one HTTP exchange and expects the
browser round trip to happen in between (a redirect handler, then a callback it awaits). A web
app's round trip spans two requests, possibly served by two processes, so it is split:

1. `start` (the user's *Connect*): the provider discovers the server's protected-resource and
   authorization-server metadata and registers a client (stored per user) exactly as the SDK
   does; where it would send the browser away, `_ConsentProvider` stops it and hands back the
   authorization URL together with the PKCE verifier and the state, which the caller keeps in
   the user's session.
2. `finish` (the callback): the SDK builds the token request from the kept metadata, and its
   token handling stores the tokens through `GrantStorage` (encrypted, per user and server).

Afterwards workers use `runtime_provider`: the SDK attaches the token and refreshes it when it
expires. A grant that can no longer be refreshed is cleared, so the toolset asks the user to
connect again (its card shows *Connect*).

Every request the flow makes goes to the MCP server's own host or to public addresses only
(`guard_request`): metadata published by a server must not point Tessera at its own network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx2
from channels.db import database_sync_to_async
from django.urls import reverse
from mcp.client.auth import OAuthClientProvider, PKCEParameters
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.auth.utils import union_scopes, validate_authorization_response_iss
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)

from core import redact
from toolsets.web.safety import blocked_reason, parse_ip_host, system_resolver

from .catalog import ServerSpec
from .models import OAuthGrant

FLOW_TIMEOUT_S = 30.0
# Refresh a little before the access token expires, not after a refused call.
EXPIRY_MARGIN_S = 30.0
PROBE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
PROBE_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


class ConsentNeeded(Exception):
    def __init__(self, url: str, state: str, verifier: str, provider: OAuthClientProvider) -> None:
        super().__init__("The user must give consent")
        self.url, self.state, self.verifier, self.provider = url, state, verifier, provider


def _not_consent(record: logging.LogRecord) -> bool:
    """The SDK logs every stop of its flow as an error; stopping it for the consent page is how
    Connect works, not a failure."""
    return not (record.exc_info and isinstance(record.exc_info[1], ConsentNeeded))


logging.getLogger("mcp.client.auth.oauth2").addFilter(_not_consent)


class GrantStorage:
    """The SDK's TokenStorage, in the database (OAuthGrant, encrypted)."""

    def __init__(self, server_id: int, user_id: int) -> None:
        self.server_id = server_id
        self.user_id = user_id

    def _grant(self) -> OAuthGrant | None:
        return OAuthGrant.objects.filter(server_id=self.server_id, user_id=self.user_id).first()

    def load(self) -> tuple[OAuthToken | None, float | None, OAuthClientInformationFull | None]:
        grant = self._grant()
        if grant is None:
            return None, None, None
        tokens = OAuthToken.model_validate_json(grant.tokens) if grant.tokens else None
        client = OAuthClientInformationFull.model_validate_json(grant.client_info) if grant.client_info else None
        if tokens is not None:
            redact.register(tokens.access_token, tokens.refresh_token)
        return tokens, grant.expires_at, client

    def save(self, **fields: Any) -> None:
        OAuthGrant.objects.update_or_create(server_id=self.server_id, user_id=self.user_id, defaults=fields)

    async def get_tokens(self) -> OAuthToken | None:
        tokens, _, _ = await database_sync_to_async(self.load, thread_sensitive=False)()
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        redact.register(tokens.access_token, tokens.refresh_token)
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        await database_sync_to_async(self.save, thread_sensitive=False)(
            tokens=tokens.model_dump_json(), expires_at=expires_at
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        _, _, client = await database_sync_to_async(self.load, thread_sensitive=False)()
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        redact.register(client_info.client_secret)
        await database_sync_to_async(self.save, thread_sensitive=False)(client_info=client_info.model_dump_json())

    async def clear_tokens(self) -> None:
        await database_sync_to_async(self.save, thread_sensitive=False)(tokens="", expires_at=None)

    async def wanted_scope(self) -> str:
        grant = await database_sync_to_async(self._grant, thread_sensitive=False)()
        return grant.wanted_scope if grant is not None else ""

    async def want_scope(self, scope: str) -> None:
        await database_sync_to_async(self.save, thread_sensitive=False)(wanted_scope=scope[:1000])


def _scopes(scope: str | None) -> set[str]:
    return set((scope or "").split())


class _Provider(OAuthClientProvider):
    """The SDK's provider, knowing when a stored token expires (the SDK keeps that in memory
    only, so a token loaded from storage would otherwise be sent until refused), and using the
    admin's pre-registered client when there is one (the SDK then neither registers a client nor
    uses a Client ID Metadata Document)."""

    def __init__(self, spec: ServerSpec, metadata: OAuthClientMetadata, storage: GrantStorage, **kwargs: Any) -> None:
        super().__init__(spec.url, metadata, storage, **kwargs)
        self.spec = spec
        # The status of the last response to the MCP request itself (401 or 403 insufficient
        # scope), which decides what a new authorization is for.
        self.refused_with = 0

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        assert isinstance(storage, GrantStorage)
        _, expires_at, _ = await database_sync_to_async(storage.load, thread_sensitive=False)()
        self.context.token_expiry_time = expires_at - EXPIRY_MARGIN_S if expires_at else None
        if self.spec.oauth_client_id:
            self.context.client_info = pre_registered(self.spec, self.context.client_metadata, None)

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if response.request.url == request.url:
                    self.refused_with = response.status_code if response.status_code in (401, 403) else 0
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            # Closed early (a failed or cancelled request): the SDK's flow holds its lock until
            # it is closed too.
            await flow.aclose()

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        if self.spec.oauth_client_id:
            # How the secret is sent depends on what the authorization server accepts, known now.
            self.context.client_info = pre_registered(
                self.spec, self.context.client_metadata, self.context.oauth_metadata
            )
        return await super()._exchange_token_authorization_code(auth_code, code_verifier)


def pre_registered(
    spec: ServerSpec, metadata: OAuthClientMetadata, server: OAuthMetadata | None
) -> OAuthClientInformationFull:
    """The admin's pre-registered client. With a secret it authenticates the way the server
    supports: HTTP Basic (the default of RFC 8414 when nothing is listed) or in the form."""
    method = "none"
    if spec.oauth_client_secret:
        supported = server.token_endpoint_auth_methods_supported if server else None
        method = "client_secret_post" if supported and "client_secret_basic" not in supported else "client_secret_basic"
    return OAuthClientInformationFull(
        client_id=spec.oauth_client_id,
        client_secret=spec.oauth_client_secret or None,
        token_endpoint_auth_method=method,  # type: ignore[arg-type]
        redirect_uris=metadata.redirect_uris,
        grant_types=metadata.grant_types,
        response_types=metadata.response_types,
        scope=metadata.scope,
    )


class _RuntimeProvider(_Provider):
    """A worker's: attaches and refreshes the token; never starts a new authorization."""

    failure = ""

    def take_failure(self) -> str:
        """Why the last request was stopped here (the transport reports only a closed stream)."""
        found, self.failure = self.failure, ""
        return found

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        # A worker cannot send anybody to a consent page.
        storage = self.context.storage
        assert isinstance(storage, GrantStorage)
        granted = self.context.current_tokens.scope if self.context.current_tokens else None
        wanted = self.context.client_metadata.scope  # the SDK's union of granted and challenged
        if self.refused_with == 403 and self.context.current_tokens is not None:
            if _scopes(wanted) <= _scopes(granted):
                # Connecting again would ask for what the grant already holds: no loop of
                # consent pages that can never help.
                self.failure = f"the server refuses this even with the access you granted ({granted or 'no scope'})."
            else:
                # A step-up: the grant stays (other tools keep working with it); the next
                # Connect asks for the union.
                await storage.want_scope(wanted or "")
                self.failure = f"this needs more access ({wanted}): connect again on the Toolsets page."
        else:
            await storage.clear_tokens()
            self.failure = "the OAuth connection expired or was revoked: connect again on the Toolsets page."
        raise OAuthFlowError(self.failure)


class _ConsentProvider(_Provider):
    """Connect: authorizes afresh whatever is stored. The stored grant is not sent (so the server
    answers 401 and publishes its metadata) but kept until the new one replaces it, and its
    scope, any step-up a call asked for and the admin's scopes are all asked for again."""

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        assert isinstance(storage, GrantStorage)
        held = self.context.current_tokens
        self.keep_scope = union_scopes(held.scope if held else None, await storage.wanted_scope() or None)
        self.context.current_tokens = None

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        context = self.context
        if context.client_info is None or not context.client_metadata.redirect_uris:
            raise OAuthFlowError("No registered client to authorize")
        if context.oauth_metadata and context.oauth_metadata.authorization_endpoint:
            endpoint = str(context.oauth_metadata.authorization_endpoint)
        else:
            endpoint = urljoin(context.get_authorization_base_url(context.server_url), "/authorize")
        # What the server asked for (WWW-Authenticate, else its metadata), with the admin's
        # scopes and what the user holds or a call needed.
        scope = union_scopes(
            union_scopes(context.client_metadata.scope, self.spec.oauth_scopes or None), self.keep_scope
        )
        context.client_metadata.scope = scope
        pkce = PKCEParameters.generate()
        state = secrets.token_urlsafe(32)
        params = {
            "response_type": "code",
            "client_id": context.client_info.client_id,
            "redirect_uri": str(context.client_metadata.redirect_uris[0]),
            "state": state,
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
        }
        if context.should_include_resource_param(context.protocol_version):
            params["resource"] = context.get_resource_url()
        if scope:
            params["scope"] = scope
        raise ConsentNeeded(f"{endpoint}?{urlencode(params)}", state, pkce.code_verifier, self)


def client_metadata(spec: ServerSpec, redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name="Tessera",
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=spec.oauth_scopes or None,
        application_type="web",
    )


def client_metadata_document(client_id: str, redirect_uri: str) -> dict[str, Any]:
    """What `client_metadata_url` serves: the client metadata with the document's own URL as
    its client_id (draft-ietf-oauth-client-id-metadata-document)."""
    document = client_metadata(ServerSpec(id=0, toolset_id="", name="", transport=""), redirect_uri).model_dump(
        mode="json", exclude_none=True
    )
    return {"client_id": client_id, **document}


def runtime_provider(spec: ServerSpec, user_id: int, redirect_uri: str = "http://localhost/") -> OAuthClientProvider:
    # The redirect URI is only used for a new authorization, which a worker never starts.
    return _RuntimeProvider(spec, client_metadata(spec, redirect_uri), GrantStorage(spec.id, user_id))


def guard_hook(spec: ServerSpec) -> Any:
    server_host = urlsplit(spec.url).hostname or ""

    async def guard(request: httpx2.Request) -> None:
        host = request.url.host
        if request.url.scheme not in ("http", "https"):
            raise OAuthFlowError(f"Refusing a {request.url.scheme}: URL in the server's metadata")
        if host == server_host:
            return
        try:
            literal = parse_ip_host(host)
        except ValueError:
            raise OAuthFlowError(f"{host} is not a valid address") from None
        addresses = (
            [str(literal)] if literal else await asyncio.to_thread(system_resolver, host, request.url.port or 443)
        )
        for address in addresses:
            reason = blocked_reason(ipaddress.ip_address(address))
            if reason:
                raise OAuthFlowError(f"The server's OAuth metadata points at {host}, which is {reason}")

    return guard


def http_client(spec: ServerSpec, auth: httpx2.Auth | None = None, **kwargs: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        auth=auth,
        timeout=httpx2.Timeout(FLOW_TIMEOUT_S),
        event_hooks={"request": [guard_hook(spec)], **kwargs.pop("event_hooks", {})},
        **kwargs,
    )


@dataclass
class Pending:
    """What the callback needs, kept in the user's session between the two requests."""

    server_id: int
    state: str
    verifier: str
    redirect_uri: str
    oauth_metadata: str
    resource_metadata: str
    auth_server_url: str
    protocol_version: str
    scope: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def start(spec: ServerSpec, user_id: int, redirect_uri: str) -> tuple[str, Pending] | None:
    """Begins the flow: the authorization URL to send the browser to, and what to keep; None
    when the server accepted the stored grant as it is."""
    from .errors import leaves

    storage = GrantStorage(spec.id, user_id)
    provider = _ConsentProvider(
        spec, client_metadata(spec, redirect_uri), storage, client_metadata_url=client_metadata_url(redirect_uri)
    )
    try:
        # A request that needs the grant (listing tools; not the GET event stream, which a
        # stateless 2026 server does not have, nor `initialize`, which some servers let
        # through): the server answers it 401 when it wants authorization, which starts the flow.
        async with (
            asyncio.timeout(FLOW_TIMEOUT_S),
            http_client(spec, provider) as http,
            http.stream("POST", spec.url, json=PROBE, headers=PROBE_HEADERS),
        ):
            return None
    except BaseException as exc:
        consent = next((e for e in leaves(exc) if isinstance(e, ConsentNeeded)), None)
        if consent is None:
            raise
    url = consent.url
    if urlsplit(url).scheme not in ("http", "https"):
        raise OAuthFlowError("The server's authorization endpoint is not an http(s) URL")
    context = consent.provider.context
    pending = Pending(
        server_id=spec.id,
        state=consent.state,
        verifier=consent.verifier,
        redirect_uri=redirect_uri,
        oauth_metadata=context.oauth_metadata.model_dump_json() if context.oauth_metadata else "",
        resource_metadata=(
            context.protected_resource_metadata.model_dump_json() if context.protected_resource_metadata else ""
        ),
        auth_server_url=context.auth_server_url or "",
        protocol_version=context.protocol_version or "",
        scope=context.client_metadata.scope or "",
    )
    return url, pending


async def finish(spec: ServerSpec, user_id: int, pending: dict[str, Any], code: str, iss: str | None) -> None:
    """Exchanges the authorization code for tokens and stores them (the callback has checked the
    response's issuer with `check_issuer` first)."""
    check_issuer(pending, iss)
    storage = GrantStorage(spec.id, user_id)
    metadata = client_metadata(spec, pending["redirect_uri"])
    metadata.scope = pending.get("scope") or None
    provider = _Provider(spec, metadata, storage)
    await provider._initialize()
    context = provider.context
    if pending.get("oauth_metadata"):
        context.oauth_metadata = OAuthMetadata.model_validate_json(pending["oauth_metadata"])
    if pending.get("resource_metadata"):
        context.protected_resource_metadata = ProtectedResourceMetadata.model_validate_json(
            pending["resource_metadata"]
        )
    context.auth_server_url = pending.get("auth_server_url") or None
    context.protocol_version = pending.get("protocol_version") or None
    request = await provider._exchange_token_authorization_code(code, pending["verifier"])
    async with http_client(spec) as http:
        response = await http.send(request)
        await provider._handle_token_response(response)
    await storage.want_scope("")  # asked for and granted


def check_issuer(pending: dict[str, Any], iss: str | None) -> None:
    """RFC 9207: the authorization response's `iss` must name the server the flow went to (a
    mix-up attack answers from another one). Checked before anything else in the response is
    used or shown. Raises OAuthFlowError."""
    found = pending.get("oauth_metadata")
    metadata = OAuthMetadata.model_validate_json(found) if found else None
    validate_authorization_response_iss(iss, metadata)


def client_metadata_url(redirect_uri: str) -> str | None:
    """Tessera's Client ID Metadata Document on the host the user reached it by (the document
    lists that host's callback), when that is https: the specification wants an https client
    ID, and a server that supports the documents then needs no registration."""
    parts = urlsplit(redirect_uri)
    if parts.scheme != "https" or not parts.netloc:
        return None
    return f"https://{parts.netloc}{reverse('mcp_client_metadata')}"


def pending_key() -> str:
    return "mcp_oauth_pending"


def remember(session: Any, pending: Pending) -> None:
    flows = dict(session.get(pending_key()) or {})
    # A few flows at most (several tabs); the oldest go first.
    while len(flows) >= 5:
        flows.pop(next(iter(flows)))
    flows[pending.state] = pending.as_dict()
    session[pending_key()] = flows


def take(session: Any, state: str) -> dict[str, Any] | None:
    flows = dict(session.get(pending_key()) or {})
    found = flows.pop(state, None) if isinstance(state, str) else None
    session[pending_key()] = flows
    return found if isinstance(found, dict) else None
