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
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx2
from channels.db import database_sync_to_async
from mcp.client.auth import OAuthClientProvider, PKCEParameters
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.auth.utils import validate_authorization_response_iss
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


class _Provider(OAuthClientProvider):
    """The SDK's provider, knowing when a stored token expires (the SDK keeps that in memory
    only, so a token loaded from storage would otherwise be sent until refused)."""

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        assert isinstance(storage, GrantStorage)
        _, expires_at, _ = await database_sync_to_async(storage.load, thread_sensitive=False)()
        self.context.token_expiry_time = expires_at - EXPIRY_MARGIN_S if expires_at else None


class _RuntimeProvider(_Provider):
    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        # A worker cannot send anybody to a consent page: the grant is over, the user connects
        # again on the Toolsets page.
        await self.context.storage.clear_tokens()  # type: ignore[attr-defined]
        raise OAuthFlowError("The OAuth connection expired or was revoked: connect again on the Toolsets page.")


class _ConsentProvider(_Provider):
    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        context = self.context
        if context.client_info is None or not context.client_metadata.redirect_uris:
            raise OAuthFlowError("No registered client to authorize")
        if context.oauth_metadata and context.oauth_metadata.authorization_endpoint:
            endpoint = str(context.oauth_metadata.authorization_endpoint)
        else:
            endpoint = urljoin(context.get_authorization_base_url(context.server_url), "/authorize")
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
        if context.client_metadata.scope:
            params["scope"] = context.client_metadata.scope
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


def runtime_provider(spec: ServerSpec, user_id: int, redirect_uri: str = "http://localhost/") -> OAuthClientProvider:
    # The redirect URI is only used for a new authorization, which a worker never starts.
    return _RuntimeProvider(spec.url, client_metadata(spec, redirect_uri), GrantStorage(spec.id, user_id))


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
    await storage.clear_tokens()  # Connect means "authorize again", whatever is stored
    provider = _ConsentProvider(spec.url, client_metadata(spec, redirect_uri), storage)
    try:
        # Opening the server's event stream is the lightest MCP request there is; the server
        # answers it 401 when it wants authorization, which starts the flow.
        async with (
            asyncio.timeout(FLOW_TIMEOUT_S),
            http_client(spec, provider) as http,
            http.stream("GET", spec.url, headers={"Accept": "text/event-stream"}),
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
    """Exchanges the authorization code for tokens and stores them."""
    storage = GrantStorage(spec.id, user_id)
    metadata = client_metadata(spec, pending["redirect_uri"])
    metadata.scope = pending.get("scope") or None
    provider = _Provider(spec.url, metadata, storage)
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
    validate_authorization_response_iss(iss, context.oauth_metadata)
    request = await provider._exchange_token_authorization_code(code, pending["verifier"])
    async with http_client(spec) as http:
        response = await http.send(request)
        await provider._handle_token_response(response)


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
