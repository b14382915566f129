from __future__ import annotations

from django.contrib import admin

from .models import ToolExecution


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
    list_filter = ["status", "toolset", "tool", "error_type", DurationFilter]
    search_fields = ["user__username", "toolset", "tool", "tool_call_id", "error"]
    list_select_related = ["user"]
    raw_id_fields = ["user", "turn"]
    readonly_fields = [f.name for f in ToolExecution._meta.fields]
    date_hierarchy = "started_at"
