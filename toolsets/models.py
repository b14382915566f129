from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import models
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from core.crypto import EncryptedTextField


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
    # a call through Tessera's MCP server (chat/api/mcp_server.py).
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


class ApiToken(models.Model):
    """A personal token for the execution API. Only a hash is stored; the token is shown once."""

    PREFIX = "tsk_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The token's last characters, to recognise it.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Chosen when the token is created, never later: calls with this token may run "ask" tools
    # when the request also says `"approve": true`.
    can_approve = models.BooleanField(
        "may approve ask tools", default=False, help_text="Calls may run tools whose policy is Ask."
    )
    # What a token reaches, chosen at creation: Tessera's tools (the execution API, MCP, the
    # server-side tools of the OpenAI-compatible API) and its agents (agents as MCP tools and as
    # models of the OpenAI-compatible API).
    may_use_tools = models.BooleanField("tools", default=True, help_text="Calls may run Tessera's tools.")
    may_use_agents = models.BooleanField("agents", default=True, help_text="Calls may run Tessera's agents.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (…{self.hint})"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(
        cls, user: Any, name: str, *, can_approve: bool = False, tools: bool = True, agents: bool = True
    ) -> tuple[ApiToken, str]:
        token = cls.PREFIX + secrets.token_urlsafe(32)
        record = cls.objects.create(
            user=user,
            name=name,
            token_hash=cls.hash(token),
            hint=token[-4:],
            can_approve=can_approve,
            may_use_tools=tools,
            may_use_agents=agents,
        )
        return record, token

    @classmethod
    def revoke_all(cls, user_id: int) -> int:
        return cls.objects.filter(user_id=user_id, revoked_at=None).update(revoked_at=timezone.now())

    @classmethod
    def authenticate(cls, token: str) -> ApiToken | None:
        if not token.startswith(cls.PREFIX):
            return None
        record = cls.objects.select_related("user").filter(token_hash=cls.hash(token), revoked_at=None).first()
        if record is None or not record.user.is_active:
            return None
        return record


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def _revoke_tokens_on_password_change(instance: Any, created: bool, **_: Any) -> None:
    """A new password revokes the user's API tokens, however it was set (the account page, the
    admin, `changepassword`, a reset): whoever changes a password because it leaked expects
    nothing that password could have made to keep working. `set_password` leaves the new
    password in `_password` until the save is done."""
    if not created and getattr(instance, "_password", None) is not None:
        ApiToken.revoke_all(instance.pk)


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


class PolicySettings(models.Model):
    """One row: the approval timeout and the circuit breakers' thresholds."""

    CACHE_KEY = "tessera:policy-settings"

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

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = 1
        super().save(*args, **kwargs)
        cache.delete(self.CACHE_KEY)

    @classmethod
    def load(cls) -> PolicySettings:
        # Read on every tool call: kept in the shared cache, dropped on save.
        found = cache.get(cls.CACHE_KEY)
        if not isinstance(found, cls):
            found = cls.objects.filter(pk=1).first() or cls(pk=1)
            cache.set(cls.CACHE_KEY, found, 300)
        return found
