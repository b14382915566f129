"""Who is calling: the one answer `/v1` (hub/openai.py), `/mcp` (hub/mcp_endpoint.py) and the
execution API (hub/execution.py) share, from a request's `Authorization: Bearer …` header.

A caller is an API token (`tsk_…`, made on the account page; hub/models.py) or, at `/mcp` only, an OAuth access
token this server issued for its `/mcp` (hub/oauth.py). Invalid tokens count against their
client address (hub/auth.py: the throttle on made-up tokens); a valid one always authenticates
and sends `bearer_authenticated`, so single sign-on can drop groups its provider no longer
vouches for before the request is served."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import HttpRequest
from django.utils import timezone

from . import oauth
from .auth import token_from
from .models import ApiToken


@dataclass(frozen=True)
class Caller:
    """A bearer caller and what it may reach."""

    user_id: int
    can_approve: bool
    tools: bool
    agents: bool
    # An API token's id and name, or an OAuth client's id and the name it showed on the consent
    # page (shown in audit and on the approval page: any client may call itself anything).
    token_id: int | None = None
    token_name: str = ""
    oauth_client_id: str = ""
    oauth_client: str = ""
    scopes: frozenset[str] = field(default_factory=frozenset)
    # Where links for this caller point back (approval page, files, resources): the site as the
    # request reached it. Set by the door that serves links (`/mcp`).
    base_url: str = ""

    @property
    def principal(self) -> str:
        """A stable key for who is calling, the same at every door: an API token, or an OAuth
        client by its client id (its tokens refresh, the client stays; its name is only what
        it calls itself, and two clients may share one), with its user. Sessions, fair share
        and the per-token caps are keyed by it."""
        who = f"token:{self.token_id}" if self.token_id else f"oauth:{self.oauth_client_id}"
        return f"{who}:user:{self.user_id}"

    @property
    def label(self) -> str:
        """How the caller is named where a person reads it ("token ci", "OAuth client Zed")."""
        return f"OAuth client {self.oauth_client}" if self.oauth_client_id else f"token {self.token_name}"


def resolve(request: HttpRequest, *, oauth_tokens: bool = False) -> Caller | None:
    """The request's bearer caller (blocking), or None.

    `oauth_tokens` (`/mcp`): OAuth access tokens are accepted too, and a request with no
    credentials at all is the start of the MCP authorization flow (the 401 tells the client
    where to sign in), not a failed sign-in, or connecting a few apps would lock a user out.
    Elsewhere only API tokens authenticate and anything else counts as a made-up token."""
    header = request.headers.get("Authorization", "")
    if oauth_tokens:
        if not header.strip():
            return None
        scheme, _, presented = header.partition(" ")
        presented = presented.strip()
        if scheme.lower() == "bearer" and presented and not presented.startswith(ApiToken.PREFIX):
            return oauth_caller(request, presented)
    record = token_from(request)
    if record is None:
        return None
    ApiToken.objects.filter(pk=record.pk).update(last_used_at=timezone.now())
    return Caller(
        user_id=record.user_id,
        can_approve=record.can_approve,
        tools=record.may_use_tools,
        agents=record.may_use_agents,
        token_id=record.pk,
        token_name=record.name,
    )


def oauth_caller(request: HttpRequest, token: str) -> Caller | None:
    """The caller for an OAuth access token presented at `/mcp`, or None (unknown, expired,
    revoked, another audience, its owner inactive: counted like a made-up API token)."""
    record = oauth.access_token_for(request, token)
    if record is None:
        return None
    scopes = frozenset(record.scope.split())
    return Caller(
        user_id=record.user_id,
        can_approve=oauth.APPROVE in scopes,
        tools=oauth.TOOLS in scopes,
        agents=oauth.AGENTS in scopes,
        oauth_client_id=record.application.client_id,
        oauth_client=oauth.facts(record.application).name,
        scopes=scopes,
    )
