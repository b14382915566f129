"""Single sign-on with OpenID Connect, through django-allauth's `openid_connect` provider.

Allauth does the protocol (discovery, state, PKCE, the code exchange, ID token checks); Tessera
decides who gets in:

- providers come from `OIDCProvider` rows (secret encrypted at rest), never from allauth's own
  `SocialApp` table: `SocialAccountAdapter.list_apps` builds the app for each enabled row, so a
  disabled provider has no button and its callback is refused (allauth answers 404);
- a first sign-in is matched to an existing account by a *verified* e-mail only; an unverified
  one that matches is refused, and a new account is created only where the provider allows it;
- the provider's groups claim sets the user's Tessera groups on every sign-in (`sync_groups`),
  touching only memberships a provider gave (`ProviderGroup`);
- what a provider vouched for lasts SSO_REVALIDATE_S: a session from a provider ends then (the
  next sign-in there reads the groups afresh), and a provider-given membership not listed again
  by a sign-in within that time is taken away (`expire_unvouched`, checked on every signed-in
  request and every bearer token's use), so a group removed at the provider stops reaching
  anything (pages, API tokens, OAuth clients) within that time at the latest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.signals import user_logged_in
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp, SocialLogin
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from core.redact import redact
from hub.auth import bearer_authenticated

from .models import OIDCProvider, ProviderGroup

log = logging.getLogger(__name__)

ALLAUTH_PROVIDER = "openid_connect"
# The provider a session signed in with, for signing out there too (views.logout).
SESSION_KEY = "sso_provider"
PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"
GROUP_NAME_MAX = Group._meta.get_field("name").max_length or 150
DISCOVERY_TIMEOUT_S = 5.0


def social_app(provider: OIDCProvider) -> SocialApp:
    """The allauth app for a provider row: built in memory, never saved (the secret stays in
    Tessera's encrypted column)."""
    return SocialApp(
        provider=ALLAUTH_PROVIDER,
        provider_id=provider.slug,
        name=provider.label,
        client_id=provider.client_id,
        secret=provider.client_secret,
        settings={
            "server_url": provider.issuer,
            "scope": provider.scope_list,
            # PKCE on every flow: providers that require it (oidc-provider, Okta) work, and a
            # stolen code is useless to anyone else everywhere.
            "oauth_pkce_enabled": True,
        },
    )


def enabled_providers() -> list[OIDCProvider]:
    """The enabled providers the sign-in page can link to. A row saved around the admin's
    validation (from a shell, a fixture) may have a slug no URL takes: it is left out and logged,
    since one bad row must not take the sign-in page down for everyone."""
    usable: list[OIDCProvider] = []
    for provider in OIDCProvider.objects.filter(enabled=True):
        try:
            validate_slug(provider.slug)  # what the admin form would have required
            reverse("openid_connect_login", args=[provider.slug])
        except (ValidationError, NoReverseMatch):
            log.warning(
                "OpenID provider %r (id %s) has no usable slug: left off the sign-in page", provider.label, provider.pk
            )
            continue
        usable.append(provider)
    return usable


def origins(providers: Iterable[OIDCProvider]) -> list[str]:
    """The providers' origins (their sign-in pages live at their issuers' hosts)."""
    found: list[str] = []
    for provider in providers:
        parts = urlsplit(provider.issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        if parts.scheme in ("https", "http") and parts.netloc and origin not in found:
            found.append(origin)
    return found


def claims_of(sociallogin: SocialLogin) -> dict[str, Any]:
    """The ID token's claims, overlaid by the userinfo endpoint's (which may carry more)."""
    data = sociallogin.account.extra_data or {}
    merged: dict[str, Any] = {}
    for part in ("id_token", "userinfo"):
        if isinstance(data.get(part), dict):
            merged.update(data[part])
    return merged


def email_verified(claims: dict[str, Any]) -> bool:
    # Some providers (Cognito, older ADFS) send the boolean as a string.
    value = claims.get("email_verified")
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def group_names(value: Any) -> list[str]:
    """The group names in a claim: a list of names, or one name. Anything else names nothing;
    names too long for a Tessera group are skipped rather than cut (a cut name is another group)."""
    items: Iterable[Any] = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    names: list[str] = []
    for item in items:
        if isinstance(item, str) and (name := item.strip()) and len(name) <= GROUP_NAME_MAX and name not in names:
            names.append(name)
    return names


def sync_groups(user: User, provider: OIDCProvider, claims: dict[str, Any]) -> tuple[set[str], set[str]]:
    """Makes the user's provider-given groups those the claim lists; returns (added, removed)
    group names. A missing claim lists no groups: access a provider no longer vouches for goes."""
    if not provider.groups_claim:
        return set(), set()
    names = group_names(claims.get(provider.groups_claim))
    with transaction.atomic():
        if provider.create_groups:
            wanted = {Group.objects.get_or_create(name=name)[0] for name in names}
        else:
            wanted = set(Group.objects.filter(name__in=names))
        member_of = set(Group.objects.filter(user=user))
        granted = {
            row.group for row in ProviderGroup.objects.filter(user=user, provider=provider).select_related("group")
        }
        added = wanted - member_of
        for group in added:
            ProviderGroup.objects.get_or_create(user=user, group=group, provider=provider)
        # Listed again: vouched for afresh.
        ProviderGroup.objects.filter(user=user, provider=provider, group__in=wanted).update(vouched_at=timezone.now())
        # A group another admin gave by hand and the provider now lists too stays unrecorded, so
        # the provider never takes away what it did not give.
        user.groups.add(*added)  # type: ignore[attr-defined]
        stale = granted - wanted
        ProviderGroup.objects.filter(user=user, provider=provider, group__in=stale).delete()
        # Another provider may have given the same group: the membership stays while any does.
        still_given = set(ProviderGroup.objects.filter(user=user, group__in=stale).values_list("group_id", flat=True))
        removed = {group for group in stale if group.pk not in still_given and group in member_of}
        user.groups.remove(*removed)  # type: ignore[attr-defined]
    return {g.name for g in added}, {g.name for g in removed}


def expire_unvouched(user_id: int) -> set[str]:
    """Takes away the provider-given memberships no sign-in has vouched for within
    SSO_REVALIDATE_S (unless another provider still vouches for the same group); returns their
    names. One indexed query when there is nothing to do."""
    cutoff = timezone.now() - timedelta(seconds=settings.SSO_REVALIDATE_S)
    stale = ProviderGroup.objects.filter(user_id=user_id, vouched_at__lt=cutoff)
    if not stale.exists():
        return set()
    with transaction.atomic():
        rows = list(stale.select_related("group"))
        ProviderGroup.objects.filter(pk__in=[row.pk for row in rows]).delete()
        still_given = set(
            ProviderGroup.objects.filter(user_id=user_id, group__in=[row.group for row in rows]).values_list(
                "group_id", flat=True
            )
        )
        gone = {row.group for row in rows if row.group_id not in still_given}
        get_user_model().groups.through.objects.filter(user_id=user_id, group__in=gone).delete()
    names = {group.name for group in gone}
    if names:
        log.info("Groups no sign-in has confirmed lately, taken from user %s: %s", user_id, sorted(names))
    return names


# Memberships lapse after hours: looking once a minute per user (or a twentieth of a shorter
# window) is plenty, and keeps the query off every page and every token use (a cache read instead).
_LOOK_EVERY_S = 60.0


def expire_unvouched_lately(user_id: int) -> set[str]:
    """`expire_unvouched`, at most once a minute per user (by the clock it compares with)."""
    key = f"sso-vouched-look:{user_id}"
    now = timezone.now().timestamp()
    last = cache.get(key)
    every = min(_LOOK_EVERY_S, settings.SSO_REVALIDATE_S / 20)
    if isinstance(last, float) and 0 <= now - last < every:
        return set()
    cache.set(key, now, max(1, int(every * 2)))
    return expire_unvouched(user_id)


@receiver(bearer_authenticated)
def _bearer_used(sender: Any, user_id: int, **_: Any) -> None:
    expire_unvouched_lately(user_id)


class RevalidateGroupsMiddleware:
    """After AuthenticationMiddleware: a signed-in request first drops the provider-given groups
    nobody has vouched for lately, so the page it gets already goes by the current ones."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            expire_unvouched_lately(user.pk)
        return self.get_response(request)


def forget_provider(provider: OIDCProvider) -> int:
    """Takes away the memberships only this provider gave (before it is deleted: its records go
    with it, and what it gave would otherwise look given by hand). Returns how many."""
    removed = 0
    with transaction.atomic():
        for row in ProviderGroup.objects.filter(provider=provider).select_related("user", "group"):
            others = ProviderGroup.objects.filter(user=row.user, group=row.group).exclude(provider=provider)
            if not others.exists():
                row.user.groups.remove(row.group)
                removed += 1
        ProviderGroup.objects.filter(provider=provider).delete()
    return removed


@receiver(pre_delete, sender=OIDCProvider)
def _provider_deleted(sender: Any, instance: OIDCProvider, **_: Any) -> None:
    forget_provider(instance)


def _refuse(request: HttpRequest, message: str, status: int = 403) -> ImmediateHttpResponse:
    return ImmediateHttpResponse(render(request, "accounts/sso_refused.html", {"message": message}, status=status))


def _provider_for(request: HttpRequest, sociallogin: SocialLogin) -> OIDCProvider:
    provider = OIDCProvider.objects.filter(slug=sociallogin.account.provider, enabled=True).first()
    if provider is None:  # switched off between the button and the callback
        raise _refuse(request, "This sign-in option is turned off.")
    return provider


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def list_apps(
        self, request: HttpRequest | None, provider: str | None = None, client_id: str | None = None
    ) -> list[SocialApp]:
        rows = OIDCProvider.objects.filter(enabled=True)
        if provider and provider != ALLAUTH_PROVIDER:
            rows = rows.filter(slug=provider)
        if client_id:
            rows = rows.filter(client_id=client_id)
        return [social_app(row) for row in rows]

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return _provider_for(request, sociallogin).create_users

    def is_auto_signup_allowed(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        # Never allauth's sign-up form: pre_social_login has already refused what it would ask about.
        return True

    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        provider = _provider_for(request, sociallogin)
        if sociallogin.is_existing:  # signed in with this provider before: the link decides
            return
        claims = claims_of(sociallogin)
        email = str(claims.get("email") or "").strip()
        if not email:
            raise _refuse(
                request, "Your identity provider did not share an e-mail address, so no Tessera account can be found."
            )
        matches = list(get_user_model().objects.filter(email__iexact=email)[:2])
        if matches:
            if not email_verified(claims):
                raise _refuse(
                    request,
                    f"An account with the e-mail address {email} exists, but your identity provider has not "
                    "verified that address, so it cannot sign in to that account. Verify the address with "
                    "your identity provider, or ask an administrator.",
                )
            if len(matches) > 1:
                raise _refuse(request, f"Several Tessera accounts use {email}. Ask an administrator to sort this out.")
            user = matches[0]
            if not user.is_active:
                raise _refuse(request, "This account is disabled.")
            # Links the provider's subject to the account: later sign-ins match by that alone.
            sociallogin.connect(request, user)
            return
        if not provider.create_users:
            raise _refuse(request, f"There is no Tessera account for {email}. Ask an administrator to create one.")

    def on_authentication_error(
        self,
        request: HttpRequest,
        provider: Any,
        error: Any = None,
        exception: Any = None,
        extra_context: Any = None,
    ) -> None:
        # A wrong state, a refused code, an unreachable provider: logged (redacted, the provider
        # may echo the secret) and shown as allauth's error page, which Tessera's template styles.
        log.warning("Single sign-on failed: %s %s", error, redact(str(exception or "")))


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest) -> bool:
        # Allauth's own sign-up pages are not routed; Tessera's sign-up has its own switch.
        return False

    def login(self, request: HttpRequest, user: User) -> None:
        # Allauth would otherwise pick a backend itself, and the session could lose its user
        # on the next request.
        if not hasattr(user, "backend"):
            user.backend = PASSWORD_BACKEND  # type: ignore[attr-defined]
        super().login(request, user)


@receiver(user_logged_in)
def _signed_in(sender: Any, request: HttpRequest, user: User, sociallogin: SocialLogin | None = None, **_: Any) -> None:
    if sociallogin is None:
        return
    provider = OIDCProvider.objects.filter(slug=sociallogin.account.provider).first()
    if provider is None:
        return
    added, removed = sync_groups(user, provider, claims_of(sociallogin))
    if added or removed:
        log.info("Groups from %s for user %s: +%s -%s", provider.slug, user.pk, sorted(added), sorted(removed))
    request.session[SESSION_KEY] = provider.slug
    # The provider vouches for this session's groups (and the account itself) this long; then
    # the browser signs in there again, which reads them afresh.
    request.session.set_expiry(settings.SSO_REVALIDATE_S)


def end_session_url(request: HttpRequest, slug: str) -> str | None:
    """Where to send a browser signing out of a session that came from this provider: its
    end_session_endpoint (RP-initiated logout), coming back to the sign-in page; None when the
    provider advertises none or cannot be reached (the local sign-out has happened anyway)."""
    provider = OIDCProvider.objects.filter(slug=slug, enabled=True).first()
    if provider is None:
        return None
    discovery = provider.issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = httpx.get(discovery, timeout=DISCOVERY_TIMEOUT_S)
        response.raise_for_status()
        endpoint = response.json().get("end_session_endpoint")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        log.warning("No sign-out at %s: %s", provider.slug, redact(str(exc)))
        return None
    if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
        return None
    query = urlencode(
        {"client_id": provider.client_id, "post_logout_redirect_uri": request.build_absolute_uri(reverse("login"))}
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
