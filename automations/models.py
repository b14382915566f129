from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

from chat.models import Chat, LLMModel, Turn
from core.crypto import EncryptedTextField
from knowledge.models import KnowledgeBase


class Automation(models.Model):
    """A prompt that runs by itself: on a schedule (cron or RRULE, in a time zone) or when its
    webhook is called. Each run is a chat of the owner's (`AutomationRun`)."""

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        WEBHOOK = "webhook", "Webhook"

    class Notify(models.TextChoices):
        ALWAYS = "always", "Always"
        FAILURE = "failure", "When a run fails"
        WAITING = "waiting", "When a run fails or waits for me"
        NEVER = "never", "Never"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="automations")
    name = models.CharField(max_length=120)
    prompt = models.TextField()
    model = models.ForeignKey(LLMModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The agent its runs are held as (its id, chat/agents: built-in ones are code, so no foreign
    # key): its instructions, toolsets, knowledge scope and, if it fixes one, its model, as the
    # hub's `agent/<id>` conversations. Empty: the model alone. Checked again at each run.
    agent = models.CharField(max_length=60, blank=True, default="")
    # The chat's tool selection format, {toolset_id: [tool names]}: knowledge bases are chosen
    # through the Knowledge toolset like in a chat.
    enabled_tools = models.JSONField(default=dict, blank=True)
    # The knowledge bases its runs search (attached to each run's chat, still only those the owner
    # may read when the run starts).
    knowledge_bases = models.ManyToManyField(KnowledgeBase, blank=True, related_name="+")
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    # A five-field cron line, or an RRULE (with or without "RRULE:"); read in `timezone`.
    schedule = models.CharField(max_length=500, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    enabled = models.BooleanField(default=True)
    notify_on = models.CharField(max_length=10, choices=Notify.choices, default=Notify.FAILURE)
    # Spend of this automation's runs this calendar month (UTC), in the models' currency; 0: none.
    monthly_budget = models.DecimalField(max_digits=10, decimal_places=4, default=Decimal(0))
    # The next slot not yet run or skipped (UTC); None for a webhook's or a disabled schedule.
    next_slot = models.DateTimeField(null=True, blank=True, db_index=True)
    webhook_secret = EncryptedTextField(blank=True, default="")
    webhook_key = models.CharField(max_length=40, unique=True, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class AutomationRun(models.Model):
    """One run: claimed in the database before its turn starts — the unique (automation, slot)
    row is what makes a slot run once however many beat and worker processes see it."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        WAITING = "waiting", "Waiting for you"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"

    class Origin(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        WEBHOOK = "webhook", "Webhook"
        MANUAL = "manual", "Run now"

    automation = models.ForeignKey(Automation, on_delete=models.CASCADE, related_name="runs")
    origin = models.CharField(max_length=10, choices=Origin.choices)
    # The schedule's slot this run is for (UTC); null for webhook and manual runs.
    slot = models.DateTimeField(null=True, blank=True)
    # Older slots missed while nothing ran (downtime), skipped by the policy in favour of this one.
    skipped_slots = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED, db_index=True)
    error = models.TextField(blank=True)
    chat = models.ForeignKey(Chat, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    attempts = models.PositiveSmallIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    # A webhook's body, kept as data for the prompt (bounded by the webhook's size limit).
    payload = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["automation", "slot"], name="one_run_per_slot")]

    def __str__(self) -> str:
        return f"Run {self.pk} of {self.automation_id} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED)


class AutomationLimits(models.Model):
    """The admin's limits (one row): who may create automations, how many, how often they may
    run, and with which models, toolsets and agents."""

    # Empty: everyone may create automations; else members of these groups (and admins).
    creator_groups = models.ManyToManyField(Group, blank=True, related_name="+")
    max_per_user = models.PositiveIntegerField(default=10)
    min_interval_minutes = models.PositiveIntegerField(default=5)
    # Empty: every model open to the owner; else only these.
    allowed_models = models.ManyToManyField(LLMModel, blank=True, related_name="+")
    # Toolset ids runs may use; empty: any the owner may use.
    allowed_toolsets = models.JSONField(default=list, blank=True)
    # Agent ids automations may run as; empty: any agent the owner may use.
    allowed_agents = models.JSONField(
        default=list,
        blank=True,
        help_text='Agent ids automations may run as, e.g. ["researcher", "clock_expert"]; empty: any agent '
        "the owner may use.",
    )

    class Meta:
        verbose_name = "automation limits"
        verbose_name_plural = "automation limits"

    def __str__(self) -> str:
        return "Automation limits"

    @classmethod
    def load(cls) -> AutomationLimits:
        limits, _ = cls.objects.get_or_create(pk=1)
        return limits
