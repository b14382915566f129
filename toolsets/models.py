from __future__ import annotations

from django.conf import settings
from django.db import models

from core.crypto import EncryptedTextField
from core.settings_row import SettingsRow


class ToolExecution(models.Model):
    """One tool call, from the agent loop or the HTTP API: the audit trail and the card's data."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCESS = "success", "Success"
        ERROR = "error", "Error"
        CANCELLED = "cancelled", "Cancelled"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tool_executions")
    turn = models.ForeignKey(
        "chat.Turn", null=True, blank=True, on_delete=models.CASCADE, related_name="tool_executions"
    )
    step = models.PositiveIntegerField(null=True, blank=True)
    position = models.PositiveIntegerField(null=True, blank=True)
    # A call a subagent made: the path of delegation calls it worked for, each as "step-position"
    # ("0-1", or "0-1/2-0" a level deeper); empty for the turn's own calls.
    lane = models.CharField(max_length=100, blank=True, default="")
    tool_call_id = models.CharField(max_length=200)
    # The program that made the call, when not Tessera's own chat: "mcp: <client's name>" for
    # a call through Tessera's MCP server (hub/mcp_server.py).
    client = models.CharField(max_length=200, blank=True, default="", db_index=True)
    toolset = models.CharField(max_length=100, db_index=True)
    tool = models.CharField(max_length=100, db_index=True)
    arguments = models.JSONField(default=dict, blank=True)
    raw_arguments = models.TextField(blank=True, help_text="Arguments exactly as the model sent them.")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_type = models.CharField(max_length=40, blank=True, db_index=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # What the result was drawn from, numbered for citation within its turn:
    # [{"n", "title", "url", "kind", "snippet"}].
    sources = models.JSONField(default=list, blank=True)
    # Tool policy: the policy the call ran under, how an "ask" was answered, and whether the
    # result came from the result cache (with the time of the call that produced it).
    policy = models.CharField(max_length=10, blank=True, default="")
    approval = models.CharField(max_length=20, blank=True, default="", db_index=True)
    cache_hit = models.BooleanField(default=False, db_index=True)
    cached_at = models.DateTimeField(null=True, blank=True)
    # An MCP App's tool: the hash of the page (toolsets.mcp.app_resources) approved when the call
    # ran, so its card shows that page after a reload even once an admin accepts a newer one.
    app_sha256 = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["turn", "step", "position"])]

    def __str__(self) -> str:
        return f"{self.toolset}.{self.tool} ({self.status})"


POLICY_CHOICES = [
    ("auto", "Auto — run"),
    ("ask", "Ask — the user approves each call"),
    ("deny", "Deny — never offered"),
]


class ToolsetConfig(models.Model):
    """Admin level, one per toolset: enabled app-wide, the app's API key, settings, limits."""

    toolset_id = models.CharField("toolset", max_length=100, unique=True)
    enabled = models.BooleanField(default=True, help_text="Off: nobody can use this toolset.")
    api_key = EncryptedTextField("app API key", blank=True, help_text="Used when a user has no key of their own.")
    settings = models.JSONField(default=dict, blank=True, help_text='e.g. {"base_url": "https://api.exa.ai"}')
    rate_limit_per_minute = models.PositiveIntegerField(
        default=60, help_text="Calls per user per minute for each tool of this toolset (0 = unlimited)."
    )
    policy = models.CharField(
        max_length=10,
        blank=True,
        choices=POLICY_CHOICES,
        help_text="For all its tools, unless a tool's own policy is set. Blank: each tool's declared default.",
    )
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="toolset_configs",
        help_text="Only members of these groups may use it; none chosen: everyone.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["toolset_id"]
        verbose_name = "toolset configuration"

    def __str__(self) -> str:
        from .registry import get_toolset

        toolset = get_toolset(self.toolset_id)
        return toolset.name if toolset else self.toolset_id


class UserToolsetConfig(models.Model):
    """User level: a user's own switch and API key for one toolset."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="toolset_configs")
    toolset_id = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    api_key = EncryptedTextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "toolset_id"], name="one_config_per_user_toolset")]

    def __str__(self) -> str:
        return f"{self.user} · {self.toolset_id}"


def ensure_configs() -> None:
    """One admin row per registered toolset, so every toolset shows up in admin."""
    from .registry import all_toolsets

    existing = set(ToolsetConfig.objects.values_list("toolset_id", flat=True))
    missing = [ToolsetConfig(toolset_id=tid) for tid in all_toolsets() if tid not in existing]
    if missing:
        ToolsetConfig.objects.bulk_create(missing, ignore_conflicts=True)


class ToolRule(models.Model):
    """Admin level, one per registered tool: its policy and whether its results may be cached.
    Rows are created for every tool the first time the admin list is shown."""

    toolset_id = models.CharField("toolset", max_length=100)
    tool = models.CharField(max_length=100)
    policy = models.CharField(
        max_length=10,
        blank=True,
        choices=POLICY_CHOICES,
        help_text="Blank: the toolset's policy, else the tool's declared default.",
    )
    cache_enabled = models.BooleanField(
        "caching", default=True, help_text="Off: never reuse a result of this tool, whatever it declares."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["toolset_id", "tool"]
        verbose_name = "tool policy"
        verbose_name_plural = "tool policies"
        constraints = [models.UniqueConstraint(fields=["toolset_id", "tool"], name="one_rule_per_tool")]

    def __str__(self) -> str:
        return f"{self.toolset_id}.{self.tool}"


class UserToolPolicy(models.Model):
    """User level: a user's own, stricter policy for one tool ("ask" or "deny")."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tool_policies")
    toolset_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=100)
    policy = models.CharField(max_length=10, choices=[("ask", "Ask"), ("deny", "Deny")])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "user tool policy"
        verbose_name_plural = "user tool policies"
        constraints = [models.UniqueConstraint(fields=["user", "toolset_id", "tool"], name="one_policy_per_user_tool")]

    def __str__(self) -> str:
        return f"{self.user} · {self.toolset_id}.{self.tool}: {self.policy}"


class ChatToolAllowance(models.Model):
    """ "Always allow this tool in this chat": an "ask" tool runs without asking in that chat."""

    chat = models.ForeignKey("chat.Chat", on_delete=models.CASCADE, related_name="tool_allowances")
    toolset_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["chat", "toolset_id", "tool"], name="one_allowance_per_chat_tool")
        ]

    def __str__(self) -> str:
        return f"chat {self.chat_id} · {self.toolset_id}.{self.tool}"


class PolicySettings(SettingsRow):
    """One row: the approval timeout and the circuit breakers' thresholds."""

    # Read on every tool call: SettingsRow.load() keeps it in the shared cache, five minutes at most.
    CACHE_KEY = "tessera:policy-settings"
    CACHE_TIMEOUT = 300

    approval_timeout_s = models.PositiveIntegerField(
        "approval timeout (seconds)", default=600, help_text="An unanswered approval counts as denied after this."
    )
    breaker_failures = models.PositiveIntegerField(
        "failures to open a breaker", default=5, help_text="Failures of one tool within the window that open it."
    )
    breaker_window_s = models.PositiveIntegerField("failure window (seconds)", default=60)
    breaker_cooldown_s = models.PositiveIntegerField(
        "cool-down (seconds)", default=30, help_text="How long an open breaker fails calls before one probe call."
    )

    class Meta:
        verbose_name = "tool policy settings"
        verbose_name_plural = "tool policy settings"

    def __str__(self) -> str:
        return "Tool policy settings"
