from __future__ import annotations

from django.conf import settings
from django.db import models


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

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["turn", "step", "position"])]

    def __str__(self) -> str:
        return f"{self.toolset}.{self.tool} ({self.status})"
