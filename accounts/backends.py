"""The switch that turns password sign-in off for everyone but superusers (AccountSettings)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from .models import AccountSettings


class PasswordSignInPolicy:
    """Listed before the password backend: while password sign-in is off, a password attempt
    for anyone but a superuser stops here, whichever page it came from (Tessera's sign-in,
    Django admin's). The refusal is an ordinary failed attempt: the same message as a wrong
    password, counted by the throttle, so it tells nobody whether the password was right."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None
    ) -> Any:
        if username is None or password is None or AccountSettings.load().password_signin:
            return None
        User = get_user_model()
        user = User._default_manager.filter(**{User.USERNAME_FIELD: username}).first()
        if user is not None and user.is_superuser:
            return None  # the password backend checks the password as usual
        # As long as checking a password takes: a refusal must not time out who is a superuser.
        make_password(password)
        raise PermissionDenied
