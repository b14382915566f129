from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "chat.accounts"
    label = "accounts"
    verbose_name = "Accounts"
    default_auto_field = "django.db.models.BigAutoField"
