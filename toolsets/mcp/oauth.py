"""MCP authorization (OAuth 2.1 with PKCE and dynamic client registration) for a web app.

The SDK's `OAuthClientProvider` runs the whole flow inside one HTTP exchange and expects the
browser round trip to happen in between (a redirect handler, then a callback it awaits). A web
app's round trip spans two requests, possibly served by two processes, so it is split:

1. `start` (the user's *Connect*): the provider discovers the server's protected-resource and
   authorization-server metadata and registers a client (stored per user) exactly as the SDK
   does; where it would send the browser away, `ConsentProvider` stops it and hands back the
   authorization URL together with the PKCE verifier and the state, which the caller keeps in
   the user's session.
2. `finish` (the callback): the SDK builds the token request from the kept metadata, and its
   token handling stores the tokens through `GrantStorage` (encrypted, per user and server).

The providers and the grant's storage are in `oauth_providers`. Afterwards workers use
`oauth_providers.runtime_provider`: the SDK attaches the token and refreshes it when it
expires. A grant that can no longer be refreshed is cleared, so the toolset asks the user to
connect again (its card shows *Connect*).

Every request the flow makes goes to the MCP server's own host or to public addresses only
(`guard_request`): metadata published by a server must not point Tessera at its own network.
"""

from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
from django.urls import reverse
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.auth.utils import validate_authorization_response_iss
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata

from toolsets.web.safety import blocked_reason, parse_ip_host, system_resolver

from .catalog import ServerSpec
from .oauth_providers import ConsentNeeded, ConsentProvider, GrantStorage, Provider, client_metadata

FLOW_TIMEOUT_S = 30.0
PROBE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
PROBE_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def client_metadata_document(client_id: str, redirect_uri: str) -> dict[str, Any]:
    """What `client_metadata_url` serves: the client metadata with the document's own URL as
    its client_id (draft-ietf-oauth-client-id-metadata-document)."""
    document = client_metadata(ServerSpec(id=0, toolset_id="", name="", transport=""), redirect_uri).model_dump(
        mode="json", exclude_none=True
    )
    return {"client_id": client_id, **document}


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
    provider = ConsentProvider(
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
    provider = Provider(spec, metadata, storage)
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
