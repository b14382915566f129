"""Sign-in throttling that slows the guesser, not the people around them.

Failed passwords (on `/login/`, `/admin/login/`, and refused sign-ups) are counted twice, with
growing waits (core/backoff.py), never a lock anyone can set off for someone else:

- per account *and* client address: a few failures free, then a wait that doubles with each
  further failure up to a cap. It refuses that address for that account only, so a colleague
  behind the same NAT or proxy signs in to their own account as usual, and the account's owner
  signs in from anywhere else;
- per account, from any address: a higher allowance, then the same doubling. It slows guessing
  spread over many addresses. A browser that has signed in to the account before (a signed
  cookie says so) is exempt, so such an attack never keeps the owner out of their usual browser.

While a wait lasts the attempt is refused without the password being checked, and is not
counted. A successful sign-in clears its account-and-address count. Bearer tokens are throttled
per address in hub/auth.py, and a valid token is never refused.

The client address is `core.http.client_address`: X-Forwarded-For only from TRUSTED_PROXIES."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from core import backoff
from core.http import client_address

PAIR = "signin-pair"
ACCOUNT = "signin-account"
KNOWN_COOKIE = "tessera_known"
KNOWN_SALT = "tessera.signin.known"
KNOWN_MAX = 8  # accounts a browser is remembered for
KNOWN_MAX_AGE_S = 365 * 24 * 3600


def _policy(free: int) -> backoff.Policy:
    return backoff.Policy(
        free=free,
        first_s=settings.SIGNIN_FIRST_DELAY_S,
        max_s=settings.SIGNIN_MAX_DELAY_S,
        memory_s=settings.SIGNIN_FAILURE_MEMORY_S,
    )


def account_key(username: str) -> str:
    # Usernames are matched exactly by Django, but counted case-blind: "Admin" and "admin" are
    # one target to a guesser.
    return hashlib.sha256(username.strip().casefold().encode("utf-8", "replace")).hexdigest()[:24]


def _pair(username: str, request: HttpRequest) -> str:
    return f"{account_key(username)}|{client_address(request)}"


def known_accounts(request: HttpRequest) -> list[str]:
    raw = request.COOKIES.get(KNOWN_COOKIE)
    if not raw:
        return []
    try:
        value = signing.loads(raw, salt=KNOWN_SALT, max_age=KNOWN_MAX_AGE_S)
    except signing.BadSignature:
        return []
    return [str(item) for item in value][:KNOWN_MAX] if isinstance(value, list) else []


def wait_for(request: HttpRequest, username: str) -> int:
    """Seconds before this client may try a password for this account (0: now)."""
    pair = backoff.wait(PAIR, _pair(username, request))
    if account_key(username) in known_accounts(request):
        return pair
    return max(pair, backoff.wait(ACCOUNT, account_key(username)))


class SignInThrottle:
    """First of the authentication backends: a password attempt while its wait lasts stops here,
    before any password is checked, whichever page it came from."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **_: Any
    ) -> Any:
        if request is None or username is None or password is None:
            return None
        wait_s = wait_for(request, str(username))
        if wait_s:
            backoff.refuse(request, wait_s, "password")
            raise PermissionDenied
        return None


def record_failure(request: HttpRequest, username: str) -> int:
    """Counts a failed password (or refused sign-up) for this account; returns the wait it sets
    off for this client, and marks the request refused when there is one."""
    pair = backoff.fail(PAIR, _pair(username, request), _policy(settings.SIGNIN_FREE_FAILURES))
    account = backoff.fail(ACCOUNT, account_key(username), _policy(settings.SIGNIN_ACCOUNT_FREE_FAILURES))
    wait_s = pair if account_key(username) in known_accounts(request) else max(pair, account)
    if wait_s:
        backoff.refuse(request, wait_s, "password")
    return wait_s


@receiver(user_login_failed)
def _failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **_: Any) -> None:
    username = credentials.get("username")
    # An attempt refused while its wait lasts was never checked, so it is not counted either.
    if request is None or not isinstance(username, str) or backoff.refused(request):
        return
    record_failure(request, username[:150])


@receiver(user_logged_in)
def _signed_in(sender: Any, request: HttpRequest | None, user: Any, **_: Any) -> None:
    if request is None:
        return
    username = user.get_username()
    backoff.clear(PAIR, _pair(username, request))
    request.signin_known = account_key(username)  # type: ignore[attr-defined]


class ThrottleMiddleware:
    """Turns a refused attempt's response into the 429 that says how long to wait, and remembers
    a browser that signed in (the cookie that exempts it from the per-account wait)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if backoff.refused(request):
            return locked_out(request)
        known = getattr(request, "signin_known", None)
        if known:
            accounts = [known, *(a for a in known_accounts(request) if a != known)][:KNOWN_MAX]
            response.set_cookie(
                KNOWN_COOKIE,
                signing.dumps(accounts, salt=KNOWN_SALT),
                max_age=KNOWN_MAX_AGE_S,
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response


def in_words(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = -(-seconds // 60)
    return f"{minutes} minutes"


def message(request: HttpRequest) -> str:
    wait_s = backoff.refused(request)
    if backoff.reason(request) == "token":
        return f"Too many invalid tokens from your address. Try again in {in_words(wait_s)}."
    return f"Too many failed sign-in attempts for this account. Try again in {in_words(wait_s)}."


def locked_out(request: HttpRequest) -> HttpResponse:
    """What a refused attempt gets: the page it came from with the reason, or a JSON error for
    API clients; 429 with Retry-After either way."""
    text = message(request)
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
    response["Retry-After"] = str(backoff.refused(request))
    return response


def _is_page(request: HttpRequest) -> bool:
    return "html" in request.headers.get("Accept", "text/html") or request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    )
