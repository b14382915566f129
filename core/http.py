"""Request types for views behind @login_required (so `request.user` is a real User)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_htmx.middleware import HtmxDetails


class AuthedRequest(HttpRequest):
    user: User
    htmx: HtmxDetails
