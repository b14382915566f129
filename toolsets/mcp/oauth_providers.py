"""The SDK's OAuth client provider, made to fit a web app and its workers (see `oauth` for the
flow): the grant kept in the database (`GrantStorage`), the token's expiry known across
processes, the admin's pre-registered client, the client secret sent only where it is bound,
and the two ways a flow may go: `RuntimeProvider` (a worker: attach and refresh the token, never
authorize afresh) and `ConsentProvider` (Connect: stop where the browser must go to the consent
page, with what the callback needs)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlencode, urljoin

import httpx2
from channels.db import database_sync_to_async
from mcp.client.auth import OAuthClientProvider, PKCEParameters
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    TokenEndpointAuthMethod,
)

from core import redact

from .catalog import ServerSpec
from .models import OAuthGrant
from .secret_binding import SecretNotSent, bind_secret

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


# A stored grant: its tokens, when the access token expires, and the registered client.
type _Loaded = tuple[OAuthToken | None, float | None, OAuthClientInformationFull | None]


class GrantStorage:
    """The SDK's TokenStorage, in the database (OAuthGrant, encrypted)."""

    def __init__(self, server_id: int, user_id: int) -> None:
        self.server_id = server_id
        self.user_id = user_id

    def _grant(self) -> OAuthGrant | None:
        return OAuthGrant.objects.filter(server_id=self.server_id, user_id=self.user_id).first()

    def load(self) -> _Loaded:
        grant = self._grant()
        if grant is None:
            return None, None, None
        tokens = OAuthToken.model_validate_json(grant.tokens) if grant.tokens else None
        client = OAuthClientInformationFull.model_validate_json(grant.client_info) if grant.client_info else None
        if tokens is not None:
            redact.register(tokens.access_token, tokens.refresh_token)
        return tokens, grant.expires_at, client

    async def _aload(self) -> _Loaded:
        # channels ships no type information: the result's type is restated here, once.
        loaded: _Loaded = await database_sync_to_async(self.load, thread_sensitive=False)()
        return loaded

    def save(self, **fields: Any) -> None:
        OAuthGrant.objects.update_or_create(server_id=self.server_id, user_id=self.user_id, defaults=fields)

    async def get_tokens(self) -> OAuthToken | None:
        tokens, _, _ = await self._aload()
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        redact.register(tokens.access_token, tokens.refresh_token)
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        await database_sync_to_async(self.save, thread_sensitive=False)(
            tokens=tokens.model_dump_json(), expires_at=expires_at
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        _, _, client = await self._aload()
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


class Provider(OAuthClientProvider):
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
        refreshed = False
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if response.request.url == request.url:
                    if response.status_code == 401 and not refreshed and self._may_refresh(outgoing):
                        # A token we hold as valid was refused: it expired early (the server's
                        # clock or rounding) or the server dropped it while the grant lives on.
                        # The refresh token heals that once; the SDK's answer to any 401 is a
                        # new authorization, which a worker cannot do, and the user would be
                        # told to connect again for nothing.
                        refreshed = True
                        if await self._handle_refresh_response((yield await self._refresh_token())):
                            self._add_auth_header(request)
                            response = yield request
                    self.refused_with = response.status_code if response.status_code in (401, 403) else 0
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            # Closed early (a failed or cancelled request): the SDK's flow holds its lock until
            # it is closed too.
            await flow.aclose()

    def _may_refresh(self, sent: httpx2.Request) -> bool:
        """Whether a 401 to `sent` is worth one refresh: it carried the access token we hold,
        and we hold a refresh token for it."""
        tokens = self.context.current_tokens
        return (
            tokens is not None
            and self.context.can_refresh_token()
            and sent.headers.get("Authorization") == f"Bearer {tokens.access_token}"
        )

    failure = ""

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        if self.spec.oauth_client_id:
            # How the secret is sent depends on what the authorization server accepts, known now.
            self.context.client_info = pre_registered(
                self.spec, self.context.client_metadata, self.context.oauth_metadata
            )
        return await self._bound(await super()._exchange_token_authorization_code(auth_code, code_verifier))

    async def _refresh_token(self) -> httpx2.Request:
        return await self._bound(await super()._refresh_token())

    async def _bound(self, request: httpx2.Request) -> httpx2.Request:
        """`request` to the token endpoint, if it may carry the admin's client secret there."""
        if self.spec.oauth_client_id and self.spec.oauth_client_secret:
            metadata = self.context.oauth_metadata
            issuer = str(metadata.issuer) if metadata is not None else self._expected_issuer()
            try:
                await database_sync_to_async(bind_secret, thread_sensitive=False)(self.spec, issuer, str(request.url))
            except SecretNotSent as exc:
                self.failure = str(exc)
                raise
        return request


def pre_registered(
    spec: ServerSpec, metadata: OAuthClientMetadata, server: OAuthMetadata | None
) -> OAuthClientInformationFull:
    """The admin's pre-registered client. With a secret it authenticates the way the server
    supports: HTTP Basic (the default of RFC 8414 when nothing is listed) or in the form."""
    method: TokenEndpointAuthMethod = "none"
    if spec.oauth_client_secret:
        supported = server.token_endpoint_auth_methods_supported if server else None
        method = "client_secret_post" if supported and "client_secret_basic" not in supported else "client_secret_basic"
    return OAuthClientInformationFull(
        client_id=spec.oauth_client_id,
        client_secret=spec.oauth_client_secret or None,
        token_endpoint_auth_method=method,
        redirect_uris=metadata.redirect_uris,
        grant_types=metadata.grant_types,
        response_types=metadata.response_types,
        scope=metadata.scope,
    )


class RuntimeProvider(Provider):
    """A worker's: attaches and refreshes the token; never starts a new authorization."""

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


class ConsentProvider(Provider):
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


def runtime_provider(spec: ServerSpec, user_id: int, redirect_uri: str = "http://localhost/") -> RuntimeProvider:
    # The redirect URI is only used for a new authorization, which a worker never starts.
    return RuntimeProvider(spec, client_metadata(spec, redirect_uri), GrantStorage(spec.id, user_id))
