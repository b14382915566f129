"""Bearer tokens: the request's API token, and the throttle on made-up tokens.

A valid token always authenticates, whatever else came from its address: tokens are long random
secrets nobody guesses, so refusing a good one would only let a stranger behind the same NAT or
proxy lock everyone there out. A token that matches nothing counts against its client address
(core/backoff.py: a few free, then doubling waits), and while that address waits, its invalid
tokens are answered 429 with Retry-After instead of 401 (the request is marked; the sign-in
throttle's middleware, accounts/throttle.py, writes the answer)."""

from __future__ import annotations

from django.conf import settings
from django.dispatch import Signal
from django.http import HttpRequest

from core import backoff
from core.http import client_address

from .models import ApiToken

SCOPE = "bearer-address"
# Sent with `user_id` each time a valid bearer token (API or OAuth) is used, before its request
# is served: single sign-on drops the groups its provider no longer vouches for
# (accounts/sso.py), so a token reaches only what its user's current groups allow.
bearer_authenticated = Signal()


def bad_token(request: HttpRequest) -> None:
    """Counts an invalid bearer token against the client address; marks the request refused
    when the address is waiting (then the attempt is not counted again)."""
    address = client_address(request)
    wait_s = backoff.wait(SCOPE, address)
    if not wait_s:
        policy = backoff.Policy(
            free=settings.TOKEN_FREE_FAILURES,
            first_s=settings.SIGNIN_FIRST_DELAY_S,
            max_s=settings.SIGNIN_MAX_DELAY_S,
            memory_s=settings.SIGNIN_FAILURE_MEMORY_S,
        )
        wait_s = backoff.fail(SCOPE, address, policy)
    if wait_s:
        backoff.refuse(request, wait_s, "token")


def token_from(request: HttpRequest) -> ApiToken | None:
    """The request's `Authorization: Bearer …` token record, or None (unknown, revoked, its
    owner inactive, a scheme other than Bearer: each counted by `bad_token`)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    record = ApiToken.authenticate(token) if scheme.lower() == "bearer" and token else None
    if record is None:
        bad_token(request)
        return None
    request.api_token = record  # type: ignore[attr-defined]
    bearer_authenticated.send(sender=ApiToken, user_id=record.user_id)
    return record
