from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ChatSearchConfig(AppConfig):
    name = "chat.search"
    label = "chatsearch"
    verbose_name = "Chat search"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.apps import apps

        # Sent once per app with models; the chat app's signal comes after every migrate.
        post_migrate.connect(_repair_index, sender=apps.get_app_config("chat"), dispatch_uid="chatsearch-repair")


def _repair_index(using: str = "default", **_: Any) -> None:
    from django.db import connections

    from . import backends

    backends.repair(connections[using])
