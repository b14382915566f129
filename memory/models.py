"""A user's memories, and whether they want the assistant to keep any.

A memory belongs to one user and is never shared: no group, no admin view of its text in lists
(the admin may delete a user, which deletes their memories with them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# The longest memory: a fact, not a document (a document belongs in a knowledge base).
MAX_CHARS = 500


class Memory(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memories")
    text = models.TextField(max_length=MAX_CHARS)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="memory_owner_recent")]

    def __str__(self) -> str:
        return self.text[:60]


class MemoryPreference(models.Model):
    """A user who turned memory off: nothing is offered to the model, nothing saved. No row:
    memory is on (the default)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="memory_preference"
    )
    enabled = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"Memory {'on' if self.enabled else 'off'} for user {self.user_id}"
