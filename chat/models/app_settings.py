from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

from core.settings_row import SettingsRow

from .catalog import LLMModel

if TYPE_CHECKING:
    from .conversation import Chat


class AppSettings(SettingsRow):
    """Site-wide settings an admin edits in Django admin (a single row)."""

    default_max_tool_iterations = models.PositiveSmallIntegerField(
        default=5, help_text="Tool steps per answer for new chats."
    )
    max_tool_iterations_cap = models.PositiveSmallIntegerField(
        default=25, help_text="The most tool steps per answer any chat may allow."
    )
    max_delegation_depth = models.PositiveSmallIntegerField(
        default=1, help_text="How deep subagents may delegate: 1 lets the assistant delegate, subagents not."
    )
    openai_api = models.BooleanField(
        "OpenAI-compatible API",
        default=False,
        help_text=(
            "Serve /v1/models and /v1/chat/completions to API tokens: Tessera's agent loop, with each "
            "user's tools and policies, for any OpenAI client."
        ),
    )
    mcp_server = models.BooleanField(
        "MCP server",
        default=False,
        help_text=(
            "Serve Tessera's tools and agents at /mcp to API tokens: any MCP client (Claude Desktop, IDEs, "
            "agent frameworks) under the same policies, limits and audit as the chat."
        ),
    )
    # What each endpoint exposes: toolset ids and agent ids; empty means all of them.
    openai_api_toolsets = models.JSONField("toolsets over the OpenAI-compatible API", default=list, blank=True)
    openai_api_agents = models.JSONField("agents over the OpenAI-compatible API", default=list, blank=True)
    mcp_server_toolsets = models.JSONField("toolsets over MCP", default=list, blank=True)
    mcp_server_agents = models.JSONField("agents over MCP", default=list, blank=True)
    trace_content = models.BooleanField(
        default=False,
        help_text=(
            "When traces are exported (OpenTelemetry), include prompts and answers in model-call spans "
            "(secrets redacted). Off: spans carry counts, models and timings only."
        ),
    )
    summary_model = models.ForeignKey(
        LLMModel,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Writes the running summary of a chat too long for its model. Empty: the chat's model.",
    )
    tool_catalogue_count = models.PositiveSmallIntegerField(
        default=30,
        help_text="Past this many selected tools, the model gets a catalogue and a find-tools tool "
        "instead of every definition. 0: never.",
    )
    tool_catalogue_tokens = models.PositiveIntegerField(
        default=6000,
        help_text="Past this many tokens of tool definitions, the same. 0: never.",
    )
    # Fair share of the workers (chat/worker/fair_share.py): a person's turns past the first cap wait
    # in their own queue; an API caller past either cap is answered 429 (Retry-After).
    running_turns_per_user = models.PositiveSmallIntegerField(
        "running answers per person",
        default=4,
        help_text=(
            "How many answers one person's chats, API calls and MCP agents may run at once; more wait "
            "in that person's own queue (API calls are told to retry), so one person's burst never holds "
            "up everyone else. 0: no cap."
        ),
    )
    running_turns_per_token = models.PositiveSmallIntegerField(
        "running answers per API token",
        default=4,
        help_text="The same for each API token or MCP client, within its person's cap. 0: no cap.",
    )
    public_shares = models.BooleanField(
        "public share links",
        default=False,
        help_text=(
            "Let people share a chat with anyone who has the link, without signing in. "
            "Off: shared chats are visible to signed-in users of this site only."
        ),
    )

    class Meta:
        verbose_name = verbose_name_plural = "app settings"

    def __str__(self) -> str:
        return "App settings"

    # Read on every chat page and every turn: SettingsRow.load() keeps it in the shared cache.
    CACHE_KEY = "app-settings"

    def exposes(self, endpoint: str, kind: str, item: str) -> bool:
        """Whether `endpoint` ("openai_api", "mcp_server") offers toolset or agent `item`."""
        chosen = getattr(self, f"{endpoint}_{kind}") or []
        return not chosen or item in chosen

    def effective_iterations(self, chat: Chat) -> int:
        """The limit a turn runs with: the chat's own number when its limit is on, else the cap."""
        cap = max(1, self.max_tool_iterations_cap)
        return min(chat.max_tool_iterations, cap) if chat.limit_tool_iterations else cap
