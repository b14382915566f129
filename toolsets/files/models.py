from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from core.settings_row import SettingsRow

from .storage import files_storage

MB = 1024 * 1024


class FileLimits(SettingsRow):
    """What users may attach, edited by an admin (a single row)."""

    max_file_mb = models.PositiveIntegerField("largest file (MB)", default=20)
    max_files_per_message = models.PositiveSmallIntegerField("files per message", default=10)
    max_total_mb_per_user = models.PositiveIntegerField("storage per user (MB)", default=500)
    max_pages = models.PositiveIntegerField(
        "most PDF pages read", default=2000, help_text="A longer PDF is refused with an error on its chip."
    )
    max_text_mb = models.PositiveIntegerField(
        "most extracted text (MB)", default=20, help_text="Text beyond this is cut, and the file says so."
    )
    extract_seconds = models.PositiveSmallIntegerField(
        "reading time limit (s)", default=60, help_text="Reading one file takes at most this long, then fails."
    )

    class Meta:
        verbose_name = verbose_name_plural = "file limits"

    def __str__(self) -> str:
        return "File limits"

    CACHE_KEY = "file-limits"

    @property
    def max_file_bytes(self) -> int:
        return self.max_file_mb * MB

    @property
    def max_total_bytes(self) -> int:
        return self.max_total_mb_per_user * MB


def _storage_name(instance: Attachment, filename: str) -> str:
    # Never the person's file name: a path of ours, which nothing uploaded can steer.
    return f"u{instance.owner_id}/{uuid.uuid4().hex}"


class Attachment(models.Model):
    """One uploaded file: stored bytes, what was read out of it, and where it was attached."""

    class Status(models.TextChoices):
        PENDING = "pending", "Reading"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    class Kind(models.TextChoices):
        TEXT = "text", "Text"
        MARKDOWN = "markdown", "Markdown"
        CSV = "csv", "CSV"
        JSON = "json", "JSON"
        HTML = "html", "HTML"
        PDF = "pdf", "PDF"
        DOCX = "docx", "Word document"
        IMAGE = "image", "Image"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments")
    # Set when the file is sent with a message (a file uploaded on the home page has no chat yet).
    chat = models.ForeignKey("chat.Chat", null=True, blank=True, on_delete=models.CASCADE, related_name="attachments")
    message = models.ForeignKey(
        "chat.Message", null=True, blank=True, on_delete=models.CASCADE, related_name="attachments"
    )
    # Every message that carries the file: the one it was sent with, and the versions of that
    # question made by editing or answering again. One stored copy, read once, counted once.
    messages = models.ManyToManyField("chat.Message", blank=True, related_name="files")
    file = models.FileField(upload_to=_storage_name, storage=files_storage, max_length=200)
    name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=20, choices=Kind.choices)
    content_type = models.CharField(max_length=100)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    error = models.CharField(max_length=500, blank=True)
    # Readings started: a reading whose worker died (its child's memory took the host down, say)
    # is redelivered, and the second one that does not finish either is the last.
    read_attempts = models.PositiveSmallIntegerField(default=0, editable=False)
    text = models.TextField(blank=True)
    # Where each page starts in `text` (PDF); one entry for other documents.
    page_starts = models.JSONField(default=list, blank=True)
    # What is known about it: image size and format, dominant colour, CSV columns, etc.
    facts = models.JSONField(default=dict, blank=True)
    thumbnail = models.BinaryField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["owner", "chat"]), models.Index(fields=["message"])]

    def __str__(self) -> str:
        return self.name

    @property
    def is_image(self) -> bool:
        return self.kind == self.Kind.IMAGE

    @property
    def page_count(self) -> int:
        return len(self.page_starts or []) or 1

    @property
    def has_thumbnail(self) -> bool:
        return bool(self.facts.get("thumbnail"))
