from __future__ import annotations

from django.db import models

from .conversation import Chat


class ChatShare(models.Model):
    """A read-only link to a snapshot of a chat: the exchanges of the branch on screen when it
    was shared (later messages and other branches are not in it)."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="shares")
    token = models.CharField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    # The turns of the branch shown when shared, oldest first.
    turn_ids = models.JSONField(default=list)
    # Anyone with the link (when the admin allows public links); else signed-in users only.
    public = models.BooleanField(default=False)
    include_files = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "shared chat"

    def __str__(self) -> str:
        return self.title or "New chat"

    @property
    def display_title(self) -> str:
        return self.title or "New chat"
