from __future__ import annotations

import json
import threading
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from core.crypto import mask
from core.groups import label as groups_label
from core.secrets_form import SecretFieldsMixin

from .models import (
    ChatToolAllowance,
    PolicySettings,
    ToolExecution,
    ToolRule,
    ToolsetConfig,
    UserToolPolicy,
    UserToolsetConfig,
    ensure_configs,
)
from .policy import breaker
from .registry import all_toolsets

# The breakers' states for the list being shown: read once per page (one pipelined Redis round
# trip), not once per row. Per thread, as Django serves each request on one.
_breaker_page = threading.local()


def _breaker_states(scopes: list[tuple[str, str, str]]) -> dict[str, breaker.BreakerState]:
    found = breaker.Breakers().states(scopes)
    counts = breaker.transition_counts()
    _breaker_page.counts = counts
    return {state.scope: state for state in found}


def _breaker_text(scope: str) -> str:
    states: dict[str, breaker.BreakerState] = getattr(_breaker_page, "states", {})
    state = states.get(scope)
    if state is None:
        return "—"
    opened = getattr(_breaker_page, "counts", {}).get((scope, breaker.OPEN), 0)
    times = f"; opened {opened} time{'s' if opened != 1 else ''}" if opened else ""
    if state.state == breaker.OPEN and state.retry_at is not None:
        return f"Open — probe after {state.retry_at:%H:%M:%S} UTC{times}"
    if state.state == breaker.HALF_OPEN:
        return f"Half-open — one probe call running{times}"
    recent = f", {state.failures} recent failure{'s' if state.failures != 1 else ''}" if state.failures else ""
    return f"Closed{recent}{times}"


class DurationFilter(admin.SimpleListFilter):
    title = "duration"
    parameter_name = "duration"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [("fast", "< 1 s"), ("medium", "1–10 s"), ("slow", "> 10 s")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "fast":
            return queryset.filter(duration_ms__lt=1000)
        if self.value() == "medium":
            return queryset.filter(duration_ms__gte=1000, duration_ms__lte=10_000)
        if self.value() == "slow":
            return queryset.filter(duration_ms__gt=10_000)
        return queryset


@admin.register(ToolExecution)
class ToolExecutionAdmin(admin.ModelAdmin):
    list_display = [
        "started_at",
        "user",
        "toolset",
        "tool",
        "status",
        "error_type",
        "duration_ms",
        "approval",
        "cache_hit",
        "client",
        "in_turn",
    ]
    list_filter = [
        "status",
        "client",
        "cache_hit",
        "approval",
        "policy",
        "toolset",
        "tool",
        "error_type",
        DurationFilter,
        ("user", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["user__username", "toolset", "tool", "tool_call_id", "error", "client"]
    list_select_related = ["user", "turn"]
    raw_id_fields = ["user", "turn"]
    readonly_fields = [f.name for f in ToolExecution._meta.fields]
    date_hierarchy = "started_at"

    @admin.display(description="turn", ordering="turn_id")
    def in_turn(self, obj: ToolExecution) -> str:
        """The chat and turn a call belongs to: the model's, or an MCP App View's on that turn's card."""
        if obj.turn is None:
            return ""
        return format_html(
            '<a href="{}">chat {} · turn {}</a>',
            reverse("admin:chat_turn_change", args=[obj.turn_id]),
            obj.turn.chat_id,
            obj.turn_id,
        )


class ToolsetConfigForm(SecretFieldsMixin):
    secret_fields = ("api_key",)

    class Meta:
        model = ToolsetConfig
        fields = ["toolset_id", "enabled", "api_key", "settings", "rate_limit_per_minute", "policy", "groups"]

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
    list_display = [
        "__str__",
        "toolset_id",
        "enabled",
        "key",
        "rate_limit_per_minute",
        "policy",
        "for_groups",
        "server_breaker",
    ]
    list_editable = ["enabled"]
    list_filter = ["enabled", "policy", "groups"]
    filter_horizontal = ["groups"]

    @admin.display(description="Groups")
    def for_groups(self, obj: ToolsetConfig) -> str:
        return groups_label(obj)

    actions = ["reset_breakers"]

    @admin.display(description="App API key")
    def key(self, obj: ToolsetConfig) -> str:
        return mask(obj.api_key) or "—"

    @admin.display(description="Server circuit breaker")
    def server_breaker(self, obj: ToolsetConfig) -> str:
        return _breaker_text(breaker.server_scope(obj.toolset_id))

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        shared = [(breaker.server_scope(t.id), t.id, "") for t in all_toolsets().values() if t.shared_breaker]
        _breaker_page.states = _breaker_states(shared)
        return super().changelist_view(request, extra_context)

    @admin.action(description="Reset the server's circuit breaker (MCP servers)")
    def reset_breakers(self, request: HttpRequest, queryset: QuerySet[ToolsetConfig]) -> None:
        board = breaker.Breakers()
        for config in queryset:
            board.reset(breaker.server_scope(config.toolset_id))
        self.message_user(request, f"Reset {queryset.count()} breaker(s).", messages.SUCCESS)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolsetConfig]:
        ensure_configs()
        return super().get_queryset(request).prefetch_related("groups")


@admin.register(ToolRule)
class ToolRuleAdmin(admin.ModelAdmin):
    """One row per registered tool: its policy, caching, and its circuit breaker's state."""

    list_display = ["__str__", "toolset_id", "tool", "declared", "policy", "cache_enabled", "cache_time", "breaker"]
    list_editable = ["policy", "cache_enabled"]
    list_filter = ["toolset_id", "policy", "cache_enabled"]
    search_fields = ["toolset_id", "tool"]
    readonly_fields = ["toolset_id", "tool", "declared", "cache_time", "breaker"]
    fields = ["toolset_id", "tool", "declared", "policy", "cache_enabled", "cache_time", "breaker"]
    actions = ["reset_breakers"]

    def _tool(self, obj: ToolRule) -> Any:
        toolset = all_toolsets().get(obj.toolset_id)
        return toolset.get(obj.tool) if toolset else None

    @admin.display(description="Declared policy")
    def declared(self, obj: ToolRule) -> str:
        found = self._tool(obj)
        return found.declared_policy.capitalize() if found else "— (no longer registered)"

    @admin.display(description="Declared cache time")
    def cache_time(self, obj: ToolRule) -> str:
        found = self._tool(obj)
        if found is None or not found.cache_ttl_s:
            return "never"
        return f"{found.cache_ttl_s} s" + (", shared between users" if found.cache_public else "")

    @admin.display(description="Circuit breaker")
    def breaker(self, obj: ToolRule) -> str:
        scope = breaker.tool_scope(obj.toolset_id, obj.tool)
        if scope not in getattr(_breaker_page, "states", {}):
            _breaker_page.states = _breaker_states([(scope, obj.toolset_id, obj.tool)])
        return _breaker_text(scope)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        _breaker_page.states = {}  # read afresh for this one tool
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        ensure_rules()
        _breaker_page.states = _breaker_states(breaker.all_scopes())
        return super().changelist_view(request, extra_context)

    @admin.action(description="Reset the circuit breaker")
    def reset_breakers(self, request: HttpRequest, queryset: QuerySet[ToolRule]) -> None:
        board = breaker.Breakers()
        for rule in queryset:
            board.reset(breaker.tool_scope(rule.toolset_id, rule.tool))
        self.message_user(request, f"Reset {queryset.count()} breaker(s).", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # one row per registered tool, made by the list itself


def ensure_rules() -> None:
    """One row per registered tool, so every tool shows up in the list."""
    existing = set(ToolRule.objects.values_list("toolset_id", "tool"))
    missing = [
        ToolRule(toolset_id=toolset.id, tool=tool.name)
        for toolset in all_toolsets().values()
        for tool in toolset.tools
        if (toolset.id, tool.name) not in existing
    ]
    if missing:
        ToolRule.objects.bulk_create(missing, ignore_conflicts=True)


@admin.register(PolicySettings)
class PolicySettingsAdmin(admin.ModelAdmin):
    list_display = ["__str__", "approval_timeout_s", "breaker_failures", "breaker_window_s", "breaker_cooldown_s"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not PolicySettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(UserToolPolicy)
class UserToolPolicyAdmin(admin.ModelAdmin):
    list_display = ["user", "toolset_id", "tool", "policy", "updated_at"]
    list_filter = ["policy", "toolset_id"]
    search_fields = ["user__username", "tool"]
    list_select_related = ["user"]
    readonly_fields = ["user", "toolset_id", "tool", "policy"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a user's own choice, made on /toolsets/


@admin.register(ChatToolAllowance)
class ChatToolAllowanceAdmin(admin.ModelAdmin):
    list_display = ["chat", "toolset_id", "tool", "created_at"]
    list_filter = ["toolset_id"]
    raw_id_fields = ["chat"]
    readonly_fields = ["chat", "toolset_id", "tool", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


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
