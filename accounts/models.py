from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from core.crypto import EncryptedTextField
from core.settings_row import SettingsRow


class AccountSettings(SettingsRow):
    """Site-wide account settings an admin edits in Django admin (a single row)."""

    open_signup = models.BooleanField(
        "open sign-up",
        default=False,
        help_text="Anyone who can reach this site may create an account on the sign-up page.",
    )
    password_signin = models.BooleanField(
        "password sign-in",
        default=True,
        help_text="Off: only superusers may sign in with a password; everyone else signs in through "
        "an OpenID Connect provider.",
    )

    class Meta:
        verbose_name = verbose_name_plural = "account settings"

    def __str__(self) -> str:
        return "Account settings"

    # Read on the sign-in page for every visitor: SettingsRow.load() keeps it in the shared cache.
    CACHE_KEY = "account-settings"


def _slug_help() -> str:
    # Admin shows help texts as HTML: no angle brackets.
    return "A short name, part of the redirect URI to register at the provider: /accounts/oidc/SLUG/login/callback/."


class OIDCProvider(models.Model):
    """An OpenID Connect provider users may sign in with (accounts/sso.py feeds it to
    django-allauth). The client secret is encrypted at rest like every key in Tessera."""

    slug = models.SlugField(unique=True, max_length=40, help_text=_slug_help())
    label = models.CharField(
        "button label", max_length=80, help_text="What the sign-in button says, e.g. “Sign in with Keycloak”."
    )
    issuer = models.URLField(
        "issuer URL",
        max_length=500,
        help_text="The provider's issuer, e.g. https://sso.example.com/realms/acme; its "
        "/.well-known/openid-configuration is read from there.",
    )
    client_id = models.CharField("client ID", max_length=255)
    client_secret = EncryptedTextField("client secret", blank=True)
    scopes = models.CharField(
        max_length=255,
        default="openid email profile",
        help_text="Space-separated. Add the scope that carries groups if your provider needs one (e.g. groups).",
    )
    groups_claim = models.CharField(
        "groups claim",
        max_length=100,
        blank=True,
        default="groups",
        help_text="The claim listing the user's groups; each is matched by name to a Tessera group. "
        "Empty: groups are not synchronised.",
    )
    create_groups = models.BooleanField(
        default=False, help_text="Create a Tessera group for a provider group that has none of its name."
    )
    create_users = models.BooleanField(
        "create users on first sign-in",
        default=False,
        help_text="Off: only people who already have a Tessera account (matched by verified e-mail) may sign in.",
    )
    enabled = models.BooleanField(default=True)
    order = models.PositiveSmallIntegerField(default=0, help_text="Buttons are shown in this order.")

    class Meta:
        ordering = ["order", "label"]
        verbose_name = "OpenID Connect provider"

    def __str__(self) -> str:
        return self.label

    @property
    def scope_list(self) -> list[str]:
        scopes = self.scopes.split()
        return scopes if "openid" in scopes else ["openid", *scopes]


class ProviderGroup(models.Model):
    """A group membership a provider's groups claim gave: the sign-in that no longer lists the
    group takes it away again. Memberships an admin gave by hand have no row and are left alone."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")
    provider = models.ForeignKey(OIDCProvider, on_delete=models.CASCADE, related_name="+")
    # The last sign-in whose groups claim listed the group: past SSO_REVALIDATE_S without another,
    # the membership goes (accounts/sso.py, expire_unvouched), whatever still uses it.
    vouched_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "group", "provider"], name="provider_group_once"),
        ]

    def __str__(self) -> str:
        return f"{self.group_id} from {self.provider_id} for {self.user_id}"


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def _disconnect_oauth_clients_on_password_change(instance: Any, created: bool, **_: Any) -> None:
    """A new password disconnects every OAuth client of the user's, as it revokes their API
    tokens (toolsets/models.py): nothing the old password let in keeps working."""
    if not created and getattr(instance, "_password", None) is not None:
        from hub import oauth  # the authorization server's module imports the models

        oauth.disconnect_all(instance.pk)
