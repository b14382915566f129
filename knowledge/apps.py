from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401 - stored files go with their documents

        post_migrate.connect(_repair_index, sender=self, dispatch_uid="knowledge-repair")


def _repair_index(using: str = "default", **_: Any) -> None:
    from django.db import connections

    from . import lexical

    lexical.repair(connections[using])
