from __future__ import annotations

from django.apps import AppConfig


class MCPConfig(AppConfig):
    name = "toolsets.mcp"
    label = "mcp"
    verbose_name = "MCP servers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import catalog

        catalog.connect_signals()
