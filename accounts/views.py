from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import requests
from allauth.socialaccount.providers.openid_connect import views as oidc_views
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import logout as auth_logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView, PasswordChangeDoneView, PasswordChangeView
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chat.shares import shares_of
from core import backoff, ratelimit
from core.http import AuthedRequest, client_address
from core.redact import redact
from hub import oauth
from hub.models import ApiToken
from memory import views as memory_views

from . import sso, throttle
from .forms import NameForm, SignupForm
from .models import AccountSettings

log = logging.getLogger(__name__)
SIGNUPS_PER_HOUR = 10
REVOKED_KEY = "tokens_revoked_by_password_change"


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not AccountSettings.load().open_signup:
        return render(request, "accounts/signup.html", {"closed": True}, status=404)
    if request.user.is_authenticated:
        return redirect("chat:home")
    form = SignupForm(request.POST or None)
    if request.method == "POST":
        # The sign-in throttle covers sign-up too: a refused sign-up (a taken username, a weak
        # password) counts as a failed attempt for that username from this address, so probing
        # for usernames is slowed down like guessing passwords.
        credentials = {"username": str(request.POST.get("username", ""))[:150]}
        wait_s = throttle.wait_for(request, credentials["username"])
        if wait_s:
            backoff.refuse(request, wait_s, "password")
            return throttle.locked_out(request)
        # Counted before validation: new accounts from one address are capped per hour.
        if not ratelimit.allow("signup", client_address(request), SIGNUPS_PER_HOUR, window_s=3600):
            form.add_error(None, "Too many sign-up attempts from your address. Try again in an hour.")
            return render(request, "accounts/signup.html", {"form": form}, status=429)
        if not form.is_valid():
            user_login_failed.send(sender=__name__, credentials=credentials, request=request)
            if backoff.refused(request):
                return throttle.locked_out(request)
        else:
            try:
                with transaction.atomic():
                    user = form.save()
            except IntegrityError:  # the same username, taken by a request that won the race
                form.add_error("username", "A user with that username already exists.")
            else:
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return redirect("chat:home")
        return render(request, "accounts/signup.html", {"form": form}, status=400)
    return render(request, "accounts/signup.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
def account(request: AuthedRequest) -> HttpResponse:
    user = request.user
    form = NameForm(request.POST or None, initial={"name": user.get_full_name()})
    if request.method == "POST":
        if not form.is_valid():
            return render(request, "accounts/account.html", _account_context(user.pk, form), status=400)
        user.first_name, user.last_name = form.cleaned_data["name"], ""
        user.save(update_fields=["first_name", "last_name"])
        messages.success(request, "Your name is saved.")
        return redirect("accounts:account")
    return render(request, "accounts/account.html", {**_account_context(user.pk, form), **_budgets(user.pk)})


def _account_context(user_id: int, form: NameForm) -> dict[str, Any]:
    return {
        "form": form,
        "tokens": _live_tokens(user_id),
        "clients": oauth.connections(user_id),
        "shares": shares_of(user_id),
        **memory_views.context(user_id),
    }


def _live_tokens(user_id: int) -> list[ApiToken]:
    return list(ApiToken.objects.filter(user_id=user_id, revoked_at=None))


@login_required
@require_POST
def create_token(request: AuthedRequest) -> HttpResponse:
    """Issues an API token (hub/models.py) and shows it this once; only its hash is kept."""
    name = " ".join(request.POST.get("name", "").split())[:100] or "API token"
    if not name.isprintable():
        return HttpResponse("A token name can only hold printable characters.", status=400)
    # Fixed at creation: a token either may run "ask" tools (each call still says so) or never.
    can_approve = request.POST.get("can_approve") in ("1", "on", "true")
    # The page's form says which it reaches; a form without the choices (older pages) gets both.
    chosen = request.POST.get("scopes") == "1"
    tools = not chosen or request.POST.get("tools") in ("1", "on", "true")
    agents = not chosen or request.POST.get("agents") in ("1", "on", "true")
    if not tools and not agents:
        return HttpResponse("A token must reach tools, agents or both.", status=400)
    record, token = ApiToken.issue(request.user, name, can_approve=can_approve, tools=tools, agents=agents)
    context = {"tokens": _live_tokens(request.user.pk), "new_token": token, "new_record": record}
    return render(request, "accounts/_tokens.html", context)


@login_required
@require_POST
def revoke_token(request: AuthedRequest, token_id: int) -> HttpResponse:
    # Looked up with its owner: another user's token id finds nothing (404).
    revoked = ApiToken.objects.filter(pk=token_id, user=request.user, revoked_at=None).update(revoked_at=timezone.now())
    if not revoked:
        raise Http404("No such token.")
    return render(request, "accounts/_tokens.html", {"tokens": _live_tokens(request.user.pk)})


@login_required
@require_POST
def disconnect_client(request: AuthedRequest, application_id: int) -> HttpResponse:
    """Revokes what an OAuth client holds of this user's: only their own tokens are touched, so
    another user's id finds nothing (404)."""
    if not oauth.disconnect(request.user.pk, application_id):
        raise Http404("No such connected client.")
    messages.success(request, "The client is disconnected: its access is revoked.")
    return redirect("accounts:account")


def _budgets(user_id: int) -> dict[str, Any]:
    from chat.spend.budgets import left_for
    from core.redis_client import sync_client

    return {"budgets": left_for(user_id, sync_client())}


class PasswordChange(PasswordChangeView):
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("accounts:password_change_done")

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "label_suffix": ""}

    def form_valid(self, form: Any) -> HttpResponse:
        # Saving the new password revokes the tokens (toolsets.models); the next page says how many.
        active = ApiToken.objects.filter(user_id=form.user.pk, revoked_at=None).count()
        response = super().form_valid(form)
        self.request.session[REVOKED_KEY] = active
        return response


class PasswordChangeDone(PasswordChangeDoneView):
    template_name = "accounts/password_change_done.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "revoked": self.request.session.pop(REVOKED_KEY, 0)}


class Login(LoginView):
    """Django's sign-in, with a button per enabled OpenID Connect provider and a link to the
    sign-up page while sign-up is open. With password sign-in off, the password form is folded
    away as the administrators' way in (accounts/backends.py refuses everyone else)."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        account_settings = AccountSettings.load()
        context["open_signup"] = account_settings.open_signup
        context["password_signin"] = account_settings.password_signin
        context["providers"] = sso.enabled_providers()
        return context

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        response = super().render_to_response(context, **kwargs)
        # Browsers hold a form's redirects to `form-action` too: the providers' buttons post here
        # and are sent on to the provider, whose origin the page must therefore allow.
        origins = sso.origins(context["providers"])
        if origins:
            allowed: list[str] = list(settings.SECURE_CSP.get("form-action") or [])  # type: ignore[call-overload]
            form_action = [*allowed, *origins]
            response._csp_config = {**settings.SECURE_CSP, "form-action": form_action}  # type: ignore[attr-defined]
        return response


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    """Signs out here, then at the provider the session came from when it offers that."""
    slug = request.session.get(sso.SESSION_KEY)
    auth_logout(request)
    elsewhere = sso.end_session_url(request, slug) if isinstance(slug, str) else None
    if elsewhere is None:
        return redirect(settings.LOGOUT_REDIRECT_URL)
    # A page that moves on by itself rather than a redirect: the sign-out form's `form-action`
    # would hold a redirect to another origin.
    return render(request, "accounts/signing_out.html", {"url": elsewhere})


def sso_refused(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(request, "accounts/sso_refused.html", {"message": message}, status=status)


UNREACHABLE = "Your identity provider could not be reached, or its answer made no sense. Try again later."


def _provider_call(
    view: Callable[[HttpRequest, str], HttpResponse], request: HttpRequest, provider_id: str
) -> HttpResponse:
    # Allauth reads the provider's discovery document before it redirects there; a provider that
    # is down, or answers something other than a discovery document, would otherwise be a 500.
    try:
        return view(request, provider_id)
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        log.warning("Identity provider %s failed: %s", provider_id[:40], redact(repr(exc)))
        return sso_refused(request, UNREACHABLE, 502)


def sso_begin(request: HttpRequest, provider_id: str) -> HttpResponse:
    # Allauth would also connect a provider to the signed-in account ("connect") or only check
    # an identity ("redirect"); Tessera has no page for either: a sign-in is all it starts.
    process = request.POST.get("process") or request.GET.get("process") or "login"
    if process != "login":
        return sso_refused(request, "Only signing in is supported here.", 400)
    return _provider_call(oidc_views.login, request, provider_id)


@require_GET
def sso_callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    return _provider_call(oidc_views.callback, request, provider_id)


# Pages allauth sends a browser to by name (allauth's own are not routed).
def sso_cancelled(request: HttpRequest) -> HttpResponse:
    return sso_refused(request, "Sign-in was cancelled.", 400)


def sso_signup(request: HttpRequest) -> HttpResponse:
    request.session.pop("socialaccount_sociallogin", None)
    return sso_refused(request, "No Tessera account could be created for this sign-in. Ask an administrator.", 403)


def account_inactive(request: HttpRequest) -> HttpResponse:
    return sso_refused(request, "This account is disabled.", 403)
