from __future__ import annotations

from django.apps import AppConfig


class WorkspaceConfig(AppConfig):
    name = "toolsets.workspace"
    label = "workspace"
    verbose_name = "Workspace (sample data)"
    default_auto_field = "django.db.models.BigAutoField"
