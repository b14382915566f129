from __future__ import annotations

from django.apps import AppConfig


class MCPConfig(AppConfig):
    name = "toolsets.mcp"
    label = "mcp"
    verbose_name = "MCP servers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import catalog, client

        catalog.connect_signals()
        # The catalog's tools call the client, which imports the catalog: handed in here.
        catalog.use_client(client)
