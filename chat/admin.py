from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from chat.spend.chart import csv_safe
from core import tracing
from core.groups import label as groups_label
from core.secrets_form import SecretFieldsMixin

from .models import AgentDefinition, AppSettings, Budget, Chat, ChatShare, LLMModel, Message, Spend, TokenUsage, Turn
from .spend import chart as spend_chart


class LLMModelForm(SecretFieldsMixin):
    secret_fields = ("api_key",)

    class Meta:
        model = LLMModel
        fields = [
            "name",
            "model",
            "api_base",
            "api_key",
            "enabled",
            "is_default",
            "extra_params",
            "context_window",
            "answer_reserve",
            "groups",
            "input_price",
            "output_price",
        ]


@admin.register(LLMModel)
class LLMModelAdmin(admin.ModelAdmin):
    form = LLMModelForm
    list_display = ["name", "model", "api_base", "key", "enabled", "is_default", "for_groups"]
    list_filter = ["enabled", "is_default", "groups"]
    search_fields = ["name", "model"]
    filter_horizontal = ["groups"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LLMModel]:
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description="Groups")
    def for_groups(self, obj: LLMModel) -> str:
        return groups_label(obj)

    @admin.display(description="API key")
    def key(self, obj: LLMModel) -> str:
        return obj.masked_key or "—"

    def save_model(self, request: HttpRequest, obj: LLMModel, form: Any, change: bool) -> None:
        with transaction.atomic():
            if obj.is_default:
                LLMModel.objects.exclude(pk=obj.pk).filter(is_default=True).update(is_default=False)
            super().save_model(request, obj, form, change)


_MESSAGE_FIELDS = (
    "role",
    "step",
    "content",
    "tool_calls",
    "tool_call_id",
    "metadata",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
)


class MessageInline(admin.TabularInline):
    model = Message
    fields = _MESSAGE_FIELDS
    readonly_fields = _MESSAGE_FIELDS
    extra = 0
    can_delete = False
    show_change_link = True


def trace_html(trace_id: str) -> str:
    """A turn's trace id, linked to the tracing UI when TESSERA_TRACE_URL says where it is."""
    if not trace_id:
        return "—"
    link = tracing.trace_link(trace_id)
    if not link:
        return trace_id
    return format_html('<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', link, trace_id)


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin):
    list_display = ["display_title", "owner", "model", "updated_at"]
    list_select_related = ["owner", "model"]
    search_fields = ["title", "owner__username"]
    raw_id_fields = ["owner"]


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ["id", "chat", "status", "iterations", "model", "tokens", "created_at", "finished_at"]
    list_filter = ["status"]
    list_select_related = ["chat", "model"]
    # A trace id pasted from the tracing UI finds its turn.
    search_fields = ["=trace_id"]
    readonly_fields = [
        "trace",
        "chat",
        "model",
        "status",
        "iterations",
        "error",
        "error_kind",
        "notices",
        "usage",
        "created_at",
        "started_at",
        "first_token_at",
        "finished_at",
    ]
    inlines = [MessageInline]

    @admin.display(description="trace")
    def trace(self, obj: Turn) -> str:
        return trace_html(obj.trace_id)

    @admin.display(description="tokens (in / out)")
    def tokens(self, obj: Turn) -> str:
        usage = obj.usage or {}
        if not usage.get("prompt_tokens") and not usage.get("completion_tokens"):
            return "—"
        return f"{usage.get('prompt_tokens', 0):,} / {usage.get('completion_tokens', 0):,}"


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "chat", "role", "short", "prompt_tokens", "completion_tokens", "finish_reason", "created_at"]
    list_filter = ["role", "finish_reason"]
    list_select_related = ["chat"]
    search_fields = ["content"]
    raw_id_fields = ["chat", "turn"]
    readonly_fields = ["trace"]

    @admin.display(description="trace")
    def trace(self, obj: Message) -> str:
        return trace_html(obj.turn.trace_id if obj.turn is not None else "")

    @admin.display(description="content")
    def short(self, obj: Message) -> str:
        return obj.content[:80]


@admin.register(TokenUsage)
class TokenUsageAdmin(admin.ModelAdmin):
    """Every user's token total, one row each: the list is a single query (users joined)."""

    list_display = ["user", "prompt_tokens", "completion_tokens", "total", "model_calls", "updated_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "user__email"]
    ordering = ["-prompt_tokens"]
    readonly_fields = ["user", "prompt_tokens", "completion_tokens", "model_calls", "updated_at"]

    @admin.display(description="total tokens")
    def total(self, obj: TokenUsage) -> int:
        return obj.total_tokens

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # written by the workers only

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


EXPOSURE_FIELDS = ("openai_api_toolsets", "openai_api_agents", "mcp_server_toolsets", "mcp_server_agents")


class AppSettingsForm(forms.ModelForm):
    """What the OpenAI-compatible API and the MCP server expose, as ticks (none ticked: all)."""

    class Meta:
        model = AppSettings
        fields = list(EXPOSURE_FIELDS)  # the admin adds the rest, by its fieldsets

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from toolsets.registry import all_toolsets

        from .agents.registry import agents

        toolsets = [(t.id, t.name) for t in all_toolsets().values()]
        known_agents = [(a.id, a.name) for a in agents().values()]
        for name in EXPOSURE_FIELDS:
            choices = toolsets if name.endswith("toolsets") else known_agents
            self.fields[name] = forms.MultipleChoiceField(
                choices=choices,
                required=False,
                widget=forms.CheckboxSelectMultiple,
                label=str(getattr(AppSettings._meta.get_field(name), "verbose_name", name)).capitalize(),
                help_text="None ticked: all of them (each user still sees only what is usable for them).",
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in EXPOSURE_FIELDS:
            cleaned[name] = sorted(cleaned.get(name) or [])
        return cleaned


@admin.register(AppSettings)
class AppSettingsAdmin(admin.ModelAdmin):
    form = AppSettingsForm
    list_display = ["__str__", "default_max_tool_iterations", "max_tool_iterations_cap"]
    fieldsets = [
        (None, {"fields": ["default_max_tool_iterations", "max_tool_iterations_cap", "max_delegation_depth"]}),
        ("Long chats and many tools", {"fields": ["summary_model", "tool_catalogue_count", "tool_catalogue_tokens"]}),
        ("OpenAI-compatible API", {"fields": ["openai_api", "openai_api_toolsets", "openai_api_agents"]}),
        ("MCP server", {"fields": ["mcp_server", "mcp_server_toolsets", "mcp_server_agents"]}),
        ("Fair share of the workers", {"fields": ["running_turns_per_user", "running_turns_per_token"]}),
        ("Sharing", {"fields": ["public_shares"]}),
        ("Traces", {"fields": ["trace_content"]}),
    ]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        # A setting added later shows up even before it is given a group here.
        listed = {name for _, options in self.fieldsets for name in options["fields"]}
        rest = [f.name for f in AppSettings._meta.fields if f.editable and f.name not in listed and f.name != "id"]
        return [*self.fieldsets, ("Other", {"fields": rest})] if rest else self.fieldsets

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not AppSettings.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["__str__", "user", "group", "period", "max_cost", "max_tokens"]
    list_filter = ["period", "group"]
    search_fields = ["user__username", "group__name"]
    raw_id_fields = ["user"]


@admin.register(Spend)
class SpendAdmin(admin.ModelAdmin):
    """Every model call's tokens and price; filter by user, group, model and date, and export
    what is shown (or selected) as CSV."""

    list_display = ["created_at", "user", "model_name", "prompt_tokens", "completion_tokens", "cost"]
    list_filter = ["model_name", "user__groups", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["user__username", "model_name"]
    date_hierarchy = "created_at"
    readonly_fields = ["user", "model", "model_name", "prompt_tokens", "completion_tokens", "cost", "created_at"]
    actions = ["export_csv"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        from django.urls import path

        chart = path("chart/", self.admin_site.admin_view(self.chart_view), name="chat_spend_chart")
        return [chart, *super().get_urls()]

    def chart_view(self, request: HttpRequest) -> HttpResponse:
        """Spend over time as a chart and a table (chat/spend/chart.py); `?format=csv` for the
        table's numbers. A bad filter is a 400 with the form's errors."""
        from django.core.exceptions import PermissionDenied
        from django.template.response import TemplateResponse

        if not self.has_view_permission(request):
            raise PermissionDenied
        # Without a query: per user and day, the last thirty days.
        form = spend_chart.ChartForm(request.GET or {"by": "user"})
        chart = spend_chart.build(form.cleaned_data) if form.is_valid() else None
        if chart is not None and request.GET.get("format") == "csv":
            return spend_chart.as_csv(chart)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Spend over time",
            "form": form,
            "chart": chart,
        }
        return TemplateResponse(
            request, "admin/chat/spend/chart.html", context, status=200 if chart is not None else 400
        )

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        # Totals of what the filters select, per user and per model, above the list.
        response = super().changelist_view(request, extra_context)
        try:
            rows = response.context_data["cl"].queryset  # type: ignore[attr-defined]
        except (AttributeError, KeyError):
            return response
        totals = {"cost": Sum("cost"), "prompt": Sum("prompt_tokens"), "completion": Sum("completion_tokens")}
        response.context_data["spend_totals"] = {  # type: ignore[attr-defined]
            "all": rows.aggregate(**totals),
            "users": rows.values("user__username").annotate(**totals).order_by("-cost")[:20],
            "models": rows.values("model_name").annotate(**totals).order_by("-cost")[:20],
        }
        return response

    @admin.action(description="Export the selected calls as CSV")
    def export_csv(self, request: HttpRequest, queryset: QuerySet[Spend]) -> HttpResponse:
        import csv

        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="tessera-spend.csv"'
        writer = csv.writer(response)
        writer.writerow(["time (UTC)", "user", "groups", "model", "prompt tokens", "completion tokens", "cost (USD)"])
        for row in queryset.select_related("user").prefetch_related("user__groups").order_by("created_at"):
            groups = ";".join(sorted(group.name for group in row.user.groups.all()))
            writer.writerow(
                [
                    row.created_at.isoformat(),
                    csv_safe(row.user.get_username()),
                    csv_safe(groups),
                    csv_safe(row.model_name),
                    row.prompt_tokens,
                    row.completion_tokens,
                    row.cost,
                ]
            )
        return response


@admin.register(ChatShare)
class ChatShareAdmin(admin.ModelAdmin):
    """Shares are made by their owners; an admin may see and revoke them (the action)."""

    list_display = ["display_title", "owner", "public", "include_files", "created_at", "revoked_at"]
    list_filter = ["public", "include_files", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["title", "chat__owner__username"]
    readonly_fields = ["chat", "token", "title", "turn_ids", "public", "include_files", "created_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="Owner")
    def owner(self, obj: ChatShare) -> str:
        return obj.chat.owner.get_username()

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChatShare]:
        return super().get_queryset(request).select_related("chat__owner")

    @admin.action(description="Revoke the selected links")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ChatShare]) -> None:
        from django.utils import timezone

        count = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} link(s).")


class AgentDefinitionForm(forms.ModelForm):
    class Meta:
        model = AgentDefinition
        fields = [
            "name",
            "slug",
            "description",
            "instructions",
            "model",
            "toolsets",
            "max_iterations",
            "enabled",
            "groups",
            "knowledge_bases",
        ]

    def clean_slug(self) -> str:
        from .agents.registry import builtin_agents

        slug = str(self.cleaned_data["slug"])
        if not re.fullmatch(r"[a-z0-9_]{1,40}", slug):
            raise forms.ValidationError("Use lowercase letters, digits and underscores only.")
        if slug in builtin_agents():
            raise forms.ValidationError("A built-in agent already has this name.")
        return slug

    def clean_toolsets(self) -> list[str]:
        from toolsets.registry import all_toolsets

        value = self.cleaned_data["toolsets"]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise forms.ValidationError('A list of toolset ids, e.g. ["web", "exa"].')
        unknown = [item for item in value if item not in all_toolsets()]
        if unknown:
            raise forms.ValidationError(
                f"Unknown toolset(s): {', '.join(unknown)}. Known: {', '.join(all_toolsets())}."
            )
        return value


@admin.register(AgentDefinition)
class AgentDefinitionAdmin(admin.ModelAdmin):
    form = AgentDefinitionForm
    list_display = ["name", "slug", "model", "max_iterations", "enabled", "for_groups"]
    list_filter = ["enabled", "groups"]
    search_fields = ["name", "slug", "description"]
    filter_horizontal = ["groups"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentDefinition]:
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description="Groups")
    def for_groups(self, obj: AgentDefinition) -> str:
        return groups_label(obj)
