"""An admin's pre-registered OAuth client secret goes only to the authorization server it was
registered with: its issuer and token endpoint, as the admin entered them or as first seen (and
kept from then on). A server's metadata naming another one later (a compromised or hostile MCP
server pointing at an authorization server of its choosing) is refused, clearly, and the secret
is not sent (`oauth_providers.Provider._bound` checks every token request that carries it)."""

from __future__ import annotations

from mcp.client.auth.exceptions import OAuthFlowError
from mcp.client.auth.utils import issuers_match

from .catalog import ServerSpec
from .models import MCPServer


class SecretNotSent(OAuthFlowError):
    """The authorization server is not the one the admin's client secret was registered with."""


def bind_secret(spec: ServerSpec, issuer: str, token_endpoint: str) -> None:
    """Allows sending the pre-registered client secret of `spec` to `token_endpoint` of `issuer`
    only if they are the ones it is bound to (the admin's, or those of its first use, kept from
    then on); raises SecretNotSent otherwise. Read from the row: a pin made by another process
    counts at once."""
    bound = MCPServer.objects.filter(pk=spec.id).values("oauth_issuer", "oauth_token_endpoint").first()
    if bound is None:
        raise SecretNotSent(f"{spec.name} is no longer configured.")
    if not bound["oauth_issuer"]:
        MCPServer.objects.filter(pk=spec.id, oauth_issuer="").update(oauth_issuer=issuer[:500])
    if not bound["oauth_token_endpoint"]:
        MCPServer.objects.filter(pk=spec.id, oauth_token_endpoint="").update(oauth_token_endpoint=token_endpoint[:500])
    bound = MCPServer.objects.filter(pk=spec.id).values("oauth_issuer", "oauth_token_endpoint").first() or bound
    if not issuers_match(bound["oauth_issuer"], issuer):
        raise SecretNotSent(
            f"{spec.name}'s authorization server is now {issuer}, but its client secret was registered with "
            f"{bound['oauth_issuer']}: the secret was not sent. An admin must check the server and, if the move "
            "is genuine, update its OAuth issuer."
        )
    if bound["oauth_token_endpoint"].rstrip("/") != token_endpoint.rstrip("/"):
        raise SecretNotSent(
            f"{spec.name}'s token endpoint is now {token_endpoint}, but its client secret is bound to "
            f"{bound['oauth_token_endpoint']}: the secret was not sent. An admin must check the server and, if "
            "the move is genuine, update its OAuth token endpoint."
        )
