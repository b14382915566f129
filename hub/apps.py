from __future__ import annotations

from django.apps import AppConfig


class HubConfig(AppConfig):
    """Everything other programs call: the OpenAI-compatible `/v1`, the `/mcp` server, the OAuth
    authorization server in front of it, and the execution API."""

    name = "hub"
    label = "hub"
    verbose_name = "Hub"
    default_auto_field = "django.db.models.BigAutoField"
