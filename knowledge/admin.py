from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.crypto import mask
from core.secrets_form import SecretFieldsMixin

from .models import RetrievalSettings


class RetrievalSettingsForm(SecretFieldsMixin):
    secret_fields = ("embedding_api_key", "rerank_api_key")

    class Meta:
        model = RetrievalSettings
        fields = [
            "embedding_model",
            "embedding_api_base",
            "embedding_api_key",
            "embedding_params",
            "rerank_model",
            "rerank_api_base",
            "rerank_api_key",
            "mcp_refresh_minutes",
        ]

    def clean_embedding_params(self) -> dict[str, Any]:
        value = self.cleaned_data.get("embedding_params") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Give a JSON object, e.g. {} or {"dimensions": 512}.')
        return value


@admin.register(RetrievalSettings)
class RetrievalSettingsAdmin(admin.ModelAdmin):
    """Saving it re-embeds every passage when the model changed (knowledge.embedding.fill)."""

    form = RetrievalSettingsForm
    list_display = ["__str__", "embedding_model", "embedding_key", "rerank_model"]

    @admin.display(description="Embedding API key")
    def embedding_key(self, obj: RetrievalSettings) -> str:
        return mask(obj.embedding_api_key) or "—"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not RetrievalSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
