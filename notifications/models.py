from __future__ import annotations

from django.conf import settings
from django.db import models


class Notification(models.Model):
    """Something a user is told while away: shown in the notification centre (unread until
    opened), pushed live to their open pages, and e-mailed when they have an address."""

    class Kind(models.TextChoices):
        RUN_COMPLETED = "run_completed", "Run completed"
        RUN_FAILED = "run_failed", "Run failed"
        RUN_WAITING = "run_waiting", "Run waiting for you"
        OTHER = "other", "Other"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=30, choices=Kind.choices, default=Kind.OTHER)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    # A path inside Tessera (never an outside address: the link is followed from an e-mail too).
    url = models.CharField(max_length=500, blank=True)
    read = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["user", "read", "-id"])]

    def __str__(self) -> str:
        return self.title
