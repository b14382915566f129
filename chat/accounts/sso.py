"""Single sign-on with OpenID Connect, through django-allauth's `openid_connect` provider.

Allauth does the protocol (discovery, state, PKCE, the code exchange, ID token checks); Tessera
decides who gets in:

- providers come from `OIDCProvider` rows (secret encrypted at rest), never from allauth's own
  `SocialApp` table: `SocialAccountAdapter.list_apps` builds the app for each enabled row, so a
  disabled provider has no button and its callback is refused (allauth answers 404);
- a first sign-in is matched to an existing account by a *verified* e-mail only; an unverified
  one that matches is refused, and a new account is created only where the provider allows it;
- the provider's groups claim sets the user's Tessera groups on every sign-in (`sync_groups`),
  touching only memberships a provider gave (`ProviderGroup`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.signals import user_logged_in
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp, SocialLogin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.http import HttpRequest
from django.shortcuts import render
from django.urls import reverse

from core.redact import redact

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
    return list(OIDCProvider.objects.filter(enabled=True))


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
        # Allauth would otherwise pick the first backend with get_user (the throttle's), and the
        # session would lose its user on the next request.
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
