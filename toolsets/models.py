from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.db import models

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

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["turn", "step", "position"])]

    def __str__(self) -> str:
        return f"{self.toolset}.{self.tool} ({self.status})"


class ToolsetConfig(models.Model):
    """Admin level, one per toolset: enabled app-wide, the app's API key, settings, limits."""

    toolset_id = models.CharField("toolset", max_length=100, unique=True)
    enabled = models.BooleanField(default=True, help_text="Off: nobody can use this toolset.")
    api_key = EncryptedTextField("app API key", blank=True, help_text="Used when a user has no key of their own.")
    settings = models.JSONField(default=dict, blank=True, help_text='e.g. {"base_url": "https://api.exa.ai"}')
    rate_limit_per_minute = models.PositiveIntegerField(
        default=60, help_text="Calls per user per minute for each tool of this toolset (0 = unlimited)."
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

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (…{self.hint})"

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def issue(cls, user: Any, name: str) -> tuple[ApiToken, str]:
        token = cls.PREFIX + secrets.token_urlsafe(32)
        record = cls.objects.create(user=user, name=name, token_hash=cls.hash(token), hint=token[-4:])
        return record, token

    @classmethod
    def authenticate(cls, token: str) -> ApiToken | None:
        if not token.startswith(cls.PREFIX):
            return None
        record = cls.objects.select_related("user").filter(token_hash=cls.hash(token), revoked_at=None).first()
        if record is None or not record.user.is_active:
            return None
        return record


def ensure_configs() -> None:
    """One admin row per registered toolset, so every toolset shows up in admin."""
    from .registry import all_toolsets

    existing = set(ToolsetConfig.objects.values_list("toolset_id", flat=True))
    missing = [ToolsetConfig(toolset_id=tid) for tid in all_toolsets() if tid not in existing]
    if missing:
        ToolsetConfig.objects.bulk_create(missing, ignore_conflicts=True)
