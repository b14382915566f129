"""Sign-in throttling with django-axes: failed attempts are counted per account and per client
address (behind the trusted proxies, `core.http.client_address`), in the database, for
`/login/`, `/admin/login/`, sign-up and API-token authentication alike. Past the limit, the
account or address is locked out until the cool-off has passed; a successful sign-in clears
its account's and address's failures.

Axes calls the functions here through its settings (`config/settings.py`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse


def lockout_parameters(request: Any, credentials: dict[str, Any] | None = None) -> list[str]:
    """Per address always; per account when the attempt names one (a token does not)."""
    username = (credentials or {}).get("username")
    if username is None and isinstance(request, HttpRequest):
        username = request.POST.get("username") if request.method == "POST" else None
    elif username is None:  # a stored attempt, when axes cleans up
        username = getattr(request, "username", None)
    return ["ip_address", "username"] if username else ["ip_address"]


def cool_off_minutes() -> int:
    return max(1, int(settings.AXES_COOLOFF_TIME.total_seconds() // 60))


def message() -> str:
    minutes = cool_off_minutes()
    return (
        "Too many failed sign-in attempts for this account or from your address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )


def locked_out(request: HttpRequest, original_response: Any = None, credentials: Any = None) -> HttpResponse:
    """What a locked-out attempt gets: the page it came from with the reason, or a JSON error
    for API clients; 429 with Retry-After either way."""
    text = message()
    response: HttpResponse
    if request.headers.get("Authorization") or not _is_page(request):
        response = JsonResponse({"error": {"type": "rate_limit_error", "message": text, "retryable": True}}, status=429)
    elif request.path == reverse("login"):
        from django.contrib.auth.forms import AuthenticationForm

        form = AuthenticationForm(request, initial={"username": request.POST.get("username", "")[:150]})
        context = {"form": form, "locked_out": text, "next": request.POST.get("next", "")}
        response = render(request, "registration/login.html", context, status=429)
    else:
        back = reverse("admin:login") if request.path.startswith(reverse("admin:index")) else reverse("login")
        response = render(request, "accounts/locked_out.html", {"message": text, "back": back}, status=429)
    response["Retry-After"] = str(cool_off_minutes() * 60)
    return response


def _is_page(request: HttpRequest) -> bool:
    return "html" in request.headers.get("Accept", "text/html") or request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    )


def client_address(request: Any) -> str | None:
    """The address axes records: the client's (`core.http.client_address`), or None when the
    request has none (a session opened by the test client or a management command). Axes
    stores it in an address column, which PostgreSQL checks, so a placeholder would fail there."""
    from ipaddress import ip_address

    from core.http import client_address as address_of

    address = address_of(request)
    try:
        return str(ip_address(address))
    except ValueError:
        return None
