from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any
from zoneinfo import available_timezones

from django import forms
from django.utils import timezone

from chat import selection as sel
from chat.models import LLMModel
from core import groups as member_groups
from core.widgets import PlainSelect
from knowledge import access

from . import agents
from .models import Automation, AutomationLimits
from .schedule import ScheduleError, parse


@functools.cache
def zone_choices() -> list[tuple[str, str]]:
    # Read when a form first needs them, not when the module is imported: listing the time zone
    # database walks its folders (0.1 s of CPU), which every process importing the views paid.
    return [(zone, zone) for zone in sorted(available_timezones())]


def may_create(user: Any, limits: AutomationLimits | None = None) -> bool:
    """Admins, and members of the admin's chosen groups (everyone when none are chosen)."""
    limits = limits or AutomationLimits.load()
    if user.is_staff:
        return True
    chosen = set(limits.creator_groups.values_list("pk", flat=True))
    return not chosen or bool(chosen & set(member_groups.of_user(user.pk)))


def models_for(user_id: int, limits: AutomationLimits) -> Any:
    models = LLMModel.for_user(user_id)
    allowed = list(limits.allowed_models.values_list("pk", flat=True))
    return models.filter(pk__in=allowed) if allowed else models


def toolset_choices(user_id: int, limits: AutomationLimits) -> list[tuple[str, str]]:
    """Usable toolsets (each with all its tools) and agents, less what the admin's limits keep out."""
    choices = []
    for row in sel.popover_rows(user_id, {}):
        if row.id == sel.AGENTS:
            choices += [(f"{sel.AGENTS}:{t.name}", f"Agent: {t.display_name}") for t in row.tools if t.usable]
        elif row.usable and (not limits.allowed_toolsets or row.id in limits.allowed_toolsets):
            choices.append((row.id, row.name))
    return choices


class AutomationForm(forms.ModelForm):
    timezone = forms.ChoiceField(choices=zone_choices, initial="UTC", widget=PlainSelect)
    agent = forms.ChoiceField(
        required=False,
        label="Agent",
        help_text="Runs are held as this agent: its instructions, its tools and knowledge bases, and its "
        "model if it has one of its own.",
        error_messages={"invalid_choice": "That agent is not available to you for automations. Choose another."},
    )
    tools = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="Tools")

    class Meta:
        model = Automation
        fields = [
            "name",
            "prompt",
            "agent",
            "model",
            "trigger",
            "schedule",
            "timezone",
            "enabled",
            "notify_on",
            "monthly_budget",
            "knowledge_bases",
        ]
        widgets = {
            "prompt": forms.Textarea(attrs={"rows": 6}),
            "trigger": forms.RadioSelect,
            "knowledge_bases": forms.CheckboxSelectMultiple,
        }
        labels = {"monthly_budget": "Monthly budget (0: no limit of its own)"}
        help_texts = {
            "schedule": "A cron line (minute hour day month weekday), e.g. “0 8 * * 1-5”, or an RRULE, "
            "e.g. “FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0”."
        }

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.limits = AutomationLimits.load()
        model_field = self.fields["model"]
        assert isinstance(model_field, forms.ModelChoiceField)
        model_field.queryset = models_for(user.pk, self.limits)
        model_field.required = False
        model_field.empty_label = "Your default model"
        model_field.help_text = "An agent with a model of its own answers with that model instead."
        agent_field = self.fields["agent"]
        assert isinstance(agent_field, forms.ChoiceField)
        offered = agents.choices(user.pk, self.limits)
        current = self.instance.agent if self.instance.pk else ""
        if current and current not in dict(offered):
            # Kept on show (not silently dropped on save): clean_agent says why it cannot stay.
            offered.append((current, agents.name_of(current)))
        agent_field.choices = [("", "None: the model alone"), *offered]
        bases_field = self.fields["knowledge_bases"]
        assert isinstance(bases_field, forms.ModelMultipleChoiceField)
        bases_field.queryset = access.visible(user.pk)
        tools_field = self.fields["tools"]
        assert isinstance(tools_field, forms.MultipleChoiceField)
        tools_field.choices = toolset_choices(user.pk, self.limits)
        self.fields["schedule"].required = False
        if self.instance.pk:
            chosen = self.instance.enabled_tools or {}
            self.initial["tools"] = [k for k in chosen if k != sel.AGENTS] + [
                f"{sel.AGENTS}:{a}" for a in chosen.get(sel.AGENTS, [])
            ]

    def clean_agent(self) -> str:
        chosen = str(self.cleaned_data.get("agent") or "")
        if chosen:
            agent, why = agents.resolve(self.user.pk, chosen, self.limits)
            if agent is None:
                raise forms.ValidationError(why)
        return chosen

    def clean_monthly_budget(self) -> Any:
        value = self.cleaned_data["monthly_budget"]
        if value is not None and value < 0:
            raise forms.ValidationError("A budget cannot be negative.")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not self.instance.pk:
            count = Automation.objects.filter(owner=self.user).count()
            if count >= self.limits.max_per_user and not self.user.is_staff:
                raise forms.ValidationError(f"You have {count} automations, the most an administrator allows.")
        if data.get("trigger") == Automation.Trigger.SCHEDULE:
            self._check_schedule(data)
        return data

    def _check_schedule(self, data: dict[str, Any]) -> None:
        text, zone = data.get("schedule", ""), data.get("timezone") or "UTC"
        try:
            schedule = parse(text, zone, self.instance.created_at or timezone.now())
        except ScheduleError as exc:
            self.add_error("schedule", str(exc))
            return
        now = timezone.now()
        if schedule.after(now) is None:
            self.add_error("schedule", "This schedule has no run left in the future.")
            return
        gap = schedule.shortest_gap(now)
        least = timedelta(minutes=self.limits.min_interval_minutes)
        if gap is not None and gap < least and not self.user.is_staff:
            self.add_error(
                "schedule",
                f"This schedule runs every {_span(gap)} at times; an administrator allows at most one run every "
                f"{_span(least)}.",
            )

    def selection(self) -> dict[str, list[str]]:
        result: dict[str, list[str]] = {}
        from toolsets.registry import all_toolsets

        toolsets = all_toolsets()
        for key in self.cleaned_data.get("tools") or []:
            if key.startswith(f"{sel.AGENTS}:"):
                result.setdefault(sel.AGENTS, []).append(key.split(":", 1)[1])
            elif key in toolsets:
                result[key] = [t.name for t in toolsets[key].tools]
        return sel.clean(result)


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours = minutes / 60
    return f"{hours:g} hour{'s' if hours != 1 else ''}"


class PreviewForm(forms.Form):
    schedule = forms.CharField(max_length=500, required=False)
    timezone = forms.CharField(max_length=64, required=False)
