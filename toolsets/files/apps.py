from __future__ import annotations

from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "toolsets.files"
    label = "files"
    verbose_name = "Files"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import signals  # noqa: F401 - storage cleanup when a file's row goes
