"""Messages a person wrote while an answer was running, not yet part of the conversation.

A *queued* message runs as the chat's next exchange when the running one completes (in order,
one after another); a *steer* is guidance for the running answer, waiting for the agent's next
step. Both are stored as soon as they are sent, so a reload, another tab or a restarted worker
still has them; a steer becomes a user message of the turn when the agent takes it, and one
the answer ended without taking joins the front of the queue."""

from __future__ import annotations

from django.db import models

from .conversation import Chat


class PendingMessage(models.Model):
    class Kind(models.TextChoices):
        QUEUED = "queued", "Queued"
        STEER = "steer", "Steer"

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="pending")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.QUEUED)
    content = models.TextField()
    # The sender's uploaded files (toolsets.files Attachment ids), checked like a sent message's
    # when it was written (`attach.claim`) and linked to the message it becomes.
    attachments = models.JSONField(default=list, blank=True)
    # The queue's order: a steer moved to the queue goes before what was queued.
    position = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        indexes = [models.Index(fields=["chat", "kind", "position", "id"], name="chat_pending_order")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.content[:40]}"
