from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import models
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver


class AccountSettings(models.Model):
    """Site-wide account settings an admin edits in Django admin (a single row)."""

    open_signup = models.BooleanField(
        "open sign-up",
        default=False,
        help_text="Anyone who can reach this site may create an account on the sign-up page.",
    )

    class Meta:
        verbose_name = verbose_name_plural = "account settings"

    def __str__(self) -> str:
        return "Account settings"

    CACHE_KEY = "account-settings"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = 1  # one row, whatever admin form or shell saves it
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> AccountSettings:
        # Read on the sign-in page for every visitor: cached, cleared on save (see below).
        obj = cache.get(cls.CACHE_KEY)
        if obj is None:
            obj, _ = cls.objects.get_or_create(pk=1)
            cache.set(cls.CACHE_KEY, obj)
        return obj  # type: ignore[no-any-return]


@receiver([post_save, post_delete], sender=AccountSettings)
def _forget(**_: Any) -> None:
    cache.delete(AccountSettings.CACHE_KEY)


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def _disconnect_oauth_clients_on_password_change(instance: Any, created: bool, **_: Any) -> None:
    """A new password disconnects every OAuth client of the user's, as it revokes their API
    tokens (toolsets/models.py): nothing the old password let in keeps working."""
    if not created and getattr(instance, "_password", None) is not None:
        from chat.api import oauth  # the authorization server's module imports the models

        oauth.disconnect_all(instance.pk)
