"""An MCP server that is its own OAuth 2.1 authorization server (`oauth_server.py PORT`), built
with the SDK's server-side auth: dynamic client registration, PKCE, refresh tokens. Consent is
given at once (the browser round trip is what the tests exercise, not a login form). Access
tokens live 2 seconds, so a second call a little later must refresh. Imports nothing from
Tessera."""

from __future__ import annotations

import secrets
import sys
import time
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

ACCESS_TTL_S = 2


class Provider:
    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.issued = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["tools"],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="alice@example",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    def _issue(self, client_id: str, scopes: list[str], subject: str | None) -> OAuthToken:
        self.issued += 1
        access = f"access-{self.issued}-{secrets.token_urlsafe(8)}"
        refresh = f"refresh-{self.issued}-{secrets.token_urlsafe(8)}"
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + ACCESS_TTL_S,
            subject=subject,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, subject=subject)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_TTL_S,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id or "", authorization_code.scopes, authorization_code.subject)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotated
        return self._issue(client.client_id or "", scopes or refresh_token.scopes, refresh_token.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise NotImplementedError  # enterprise identity assertions are not offered


def main(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    provider = Provider()
    server = MCPServer(
        name="oauth-server",
        version="1.0",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["tools"]),
            required_scopes=["tools"],
        ),
    )

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The access token's number and subject this call came with."""
        headers = ctx.headers or {}
        token = str(headers.get("authorization", "")).removeprefix("Bearer ")
        found = provider.access.get(token)
        return f"{token.split('-')[1] if token.count('-') >= 2 else '?'} {found.subject if found else '?'}"

    import uvicorn

    # Bounded: a 2026 client's open `subscriptions/listen` stream would hold a graceful shutdown.
    uvicorn.run(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )


if __name__ == "__main__":
    main(int(sys.argv[1]))
