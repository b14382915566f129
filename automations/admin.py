from typing import Any

from django import forms
from django.contrib import admin

from chat.agents import agents

from .models import Automation, AutomationLimits, AutomationRun


class AutomationLimitsForm(forms.ModelForm):
    class Meta:
        model = AutomationLimits
        fields = [
            "creator_groups",
            "max_per_user",
            "min_interval_minutes",
            "allowed_models",
            "allowed_toolsets",
            "allowed_agents",
        ]

    def clean_allowed_agents(self) -> Any:
        chosen = self.cleaned_data.get("allowed_agents") or []
        if not isinstance(chosen, list) or not all(isinstance(a, str) for a in chosen):
            raise forms.ValidationError('A list of agent ids, e.g. ["researcher"].')
        unknown = [a for a in chosen if a not in agents()]
        if unknown:
            known = ", ".join(agents())
            raise forms.ValidationError(f"No agent has the id {', '.join(unknown)}. Known: {known}.")
        return chosen


@admin.register(AutomationLimits)
class AutomationLimitsAdmin(admin.ModelAdmin):
    form = AutomationLimitsForm
    filter_horizontal = ("creator_groups", "allowed_models")

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return not AutomationLimits.objects.exists()


@admin.register(Automation)
class AutomationAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "agent", "trigger", "schedule", "timezone", "enabled", "next_slot")
    list_filter = ("trigger", "enabled")
    search_fields = ("name", "owner__username")
    exclude = ("webhook_secret",)
    readonly_fields = ("webhook_key", "next_slot")


@admin.register(AutomationRun)
class AutomationRunAdmin(admin.ModelAdmin):
    list_display = ("automation", "origin", "slot", "status", "attempts", "cost", "created_at")
    list_filter = ("status", "origin")
    readonly_fields = [f.name for f in AutomationRun._meta.fields]
