"""An artifact belongs to one chat (and so to its owner); each change is a new version, by the
agent (a tool call of a turn) or by the user (the panel's editor). Nothing is overwritten: the
panel switches between versions, and export and shares carry them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Artifact(models.Model):
    class Kind(models.TextChoices):
        HTML = "html", "HTML"
        SVG = "svg", "SVG"
        MARKDOWN = "markdown", "Markdown"
        MERMAID = "mermaid", "Mermaid"
        CODE = "code", "Code"
        CSV = "csv", "CSV"

    chat = models.ForeignKey("chat.Chat", on_delete=models.CASCADE, related_name="artifacts")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="artifacts")
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # For code: the language the model named (highlighting and the download's extension).
    language = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["chat", "id"])]

    def __str__(self) -> str:
        return self.title


class ArtifactVersion(models.Model):
    class Author(models.TextChoices):
        AGENT = "agent", "Assistant"
        USER = "user", "You"

    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content = models.TextField()
    author = models.CharField(max_length=8, choices=Author.choices)
    # The turn whose tool call made it (agent versions); shares show versions of their turns.
    turn_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["artifact", "number"], name="artifact_version_number")]

    def __str__(self) -> str:
        return f"{self.artifact_id} v{self.number}"
