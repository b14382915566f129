"""One user's workspace. Every row belongs to a user, and every query in the tools filters by it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Project(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_projects")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="workspace_project_unique_name")]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    class Status(models.TextChoices):
        TODO = "TODO", "To do"
        IN_PROGRESS = "IN_PROGRESS", "In progress"
        BLOCKED = "BLOCKED", "Blocked"
        DONE = "DONE", "Done"

    class Priority(models.TextChoices):
        LOW = "LOW", "Low"
        MEDIUM = "MEDIUM", "Medium"
        HIGH = "HIGH", "High"
        URGENT = "URGENT", "Urgent"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_tasks")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.TODO)
    priority = models.CharField(max_length=20, choices=Priority.choices, default=Priority.MEDIUM)
    due_date = models.DateField(null=True, blank=True)
    assignee = models.CharField(max_length=100, blank=True)
    # Not auto_now: the seed backdates it so that "stale" tasks exist; update_task sets it.
    updated_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["user", "status"], name="workspace_task_user_status"),
            models.Index(fields=["user", "updated_at"], name="workspace_task_user_updated"),
            models.Index(fields=["user", "due_date"], name="workspace_task_user_due"),
        ]

    def __str__(self) -> str:
        return self.name


class CalendarEvent(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_events")
    title = models.CharField(max_length=200)
    start = models.DateTimeField()
    end = models.DateTimeField()
    attendees = models.JSONField(default=list, blank=True)
    location = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["start"]
        indexes = [models.Index(fields=["user", "start"], name="workspace_event_user_start")]

    def __str__(self) -> str:
        return self.title


class Email(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_emails")
    sender_name = models.CharField(max_length=200)
    sender_email = models.EmailField()
    subject = models.CharField(max_length=300)
    snippet = models.CharField(max_length=300)
    body = models.TextField()
    received_at = models.DateTimeField()
    unread = models.BooleanField(default=True)

    class Meta:
        ordering = ["-received_at"]
        indexes = [
            models.Index(fields=["user", "received_at"], name="workspace_email_user_received"),
            models.Index(fields=["user", "unread", "received_at"], name="workspace_email_user_unread"),
        ]

    def __str__(self) -> str:
        return self.subject


class Meeting(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_meetings")
    title = models.CharField(max_length=200)
    start = models.DateTimeField()
    attendees = models.JSONField(default=list, blank=True)
    summary = models.TextField(blank=True)
    # [{"text": str, "owner": str, "done": bool}, ...]
    action_items = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-start"]
        indexes = [models.Index(fields=["user", "start"], name="workspace_meeting_user_start")]

    def __str__(self) -> str:
        return self.title


class SocialPost(models.Model):
    class Platform(models.TextChoices):
        LINKEDIN = "linkedin", "LinkedIn"
        X = "x", "X"
        MASTODON = "mastodon", "Mastodon"
        BLUESKY = "bluesky", "Bluesky"

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SCHEDULED = "scheduled", "Scheduled"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workspace_posts")
    platform = models.CharField(max_length=20, choices=Platform.choices)
    text = models.TextField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "created_at"], name="workspace_post_user_created")]

    def __str__(self) -> str:
        return f"{self.get_platform_display()} {self.status}"
