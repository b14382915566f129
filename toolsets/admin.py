from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.crypto import mask
from core.secrets_form import SecretFieldsMixin

from .models import ApiToken, ToolExecution, ToolsetConfig, UserToolsetConfig, ensure_configs
from .registry import all_toolsets


class DurationFilter(admin.SimpleListFilter):
    title = "duration"
    parameter_name = "duration"

    def lookups(self, request, model_admin):  # type: ignore[no-untyped-def]
        return [("fast", "< 1 s"), ("medium", "1–10 s"), ("slow", "> 10 s")]

    def queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        if self.value() == "fast":
            return queryset.filter(duration_ms__lt=1000)
        if self.value() == "medium":
            return queryset.filter(duration_ms__gte=1000, duration_ms__lte=10_000)
        if self.value() == "slow":
            return queryset.filter(duration_ms__gt=10_000)
        return queryset


@admin.register(ToolExecution)
class ToolExecutionAdmin(admin.ModelAdmin):
    list_display = ["started_at", "user", "toolset", "tool", "status", "error_type", "duration_ms"]
    list_filter = [
        "status",
        "toolset",
        "tool",
        "error_type",
        DurationFilter,
        ("user", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["user__username", "toolset", "tool", "tool_call_id", "error"]
    list_select_related = ["user"]
    raw_id_fields = ["user", "turn"]
    readonly_fields = [f.name for f in ToolExecution._meta.fields]
    date_hierarchy = "started_at"


class ToolsetConfigForm(SecretFieldsMixin):
    secret_fields = ("api_key",)

    class Meta:
        model = ToolsetConfig
        fields = ["toolset_id", "enabled", "api_key", "settings", "rate_limit_per_minute"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(ts.id, ts.name) for ts in all_toolsets().values()]
        self.fields["toolset_id"] = forms.ChoiceField(choices=choices, label="Toolset")
        if self.instance.pk:
            self.fields["toolset_id"].disabled = True
            toolset = all_toolsets().get(self.instance.toolset_id)
            if toolset and toolset.default_settings:
                self.fields["settings"].help_text = (
                    "Overrides of the defaults: " + json.dumps(toolset.default_settings) + ". Leave {} to use them."
                )


@admin.register(ToolsetConfig)
class ToolsetConfigAdmin(admin.ModelAdmin):
    form = ToolsetConfigForm
    list_display = ["__str__", "toolset_id", "enabled", "key", "rate_limit_per_minute", "updated_at"]
    list_editable = ["enabled"]
    list_filter = ["enabled"]

    @admin.display(description="App API key")
    def key(self, obj: ToolsetConfig) -> str:
        return mask(obj.api_key) or "—"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolsetConfig]:
        ensure_configs()
        return super().get_queryset(request)


@admin.register(UserToolsetConfig)
class UserToolsetConfigAdmin(admin.ModelAdmin):
    list_display = ["user", "toolset_id", "enabled", "has_key", "updated_at"]
    list_filter = ["toolset_id", "enabled"]
    search_fields = ["user__username"]
    list_select_related = ["user"]
    exclude = ["api_key"]
    readonly_fields = ["user", "toolset_id"]

    @admin.display(boolean=True, description="own key")
    def has_key(self, obj: UserToolsetConfig) -> bool:
        return bool(obj.api_key)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "hint", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username"]
    list_select_related = ["user"]
    exclude = ["token_hash"]
    readonly_fields = ["user", "name", "hint", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are issued by their owner, on the settings page
