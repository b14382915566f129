"""API tokens as a Django authentication backend, so that token authentication goes through
`django.contrib.auth.authenticate` like a password: every failure is counted by the sign-in
throttle (django-axes, per client address), and a locked-out address is refused even a valid
token until its cool-off has passed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from django.http import HttpRequest

from .models import ApiToken


class ApiTokenBackend:
    def authenticate(self, request: HttpRequest | None, api_token: str | None = None, **_: Any) -> Any:
        if api_token is None:
            return None
        record = ApiToken.authenticate(api_token)
        if record is None:
            return None
        if request is not None:
            request.api_token = record  # type: ignore[attr-defined]
        return record.user

    def get_user(self, user_id: int) -> None:
        return None  # a token never starts a session


def token_from(request: HttpRequest) -> ApiToken | None:
    """The request's `Authorization: Bearer …` token record, or None (unknown, revoked, its
    owner inactive, a scheme other than Bearer, or the address locked out)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        authenticate(request, api_token="-")  # counted as a failure like a wrong token
        return None
    if authenticate(request, api_token=token) is None:
        return None
    record: ApiToken = request.api_token  # type: ignore[attr-defined]
    return record
