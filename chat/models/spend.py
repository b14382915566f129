from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .catalog import LLMModel


class TokenUsage(models.Model):
    """Each user's running token total over every model call of their turns. A ledger rather
    than a sum over messages: deleting a chat does not give its tokens back."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_usage")
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    model_calls = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-prompt_tokens"]
        verbose_name = verbose_name_plural = "token usage"

    def __str__(self) -> str:
        return f"Token usage of {self.user}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def record(cls, user_id: int, prompt_tokens: int, completion_tokens: int) -> None:
        """Adds one model call, atomically (turns of one user may finish at the same moment)."""
        from django.db import IntegrityError, transaction
        from django.db.models import F

        changes = {
            "prompt_tokens": F("prompt_tokens") + prompt_tokens,
            "completion_tokens": F("completion_tokens") + completion_tokens,
            "model_calls": F("model_calls") + 1,
            "updated_at": timezone.now(),
        }
        if cls.objects.filter(user_id=user_id).update(**changes):
            return
        try:
            with transaction.atomic():
                cls.objects.create(
                    user_id=user_id, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, model_calls=1
                )
        except IntegrityError:  # another turn created the row first
            cls.objects.filter(user_id=user_id).update(**changes)


class Budget(models.Model):
    """A spending limit for one user, or for the members of one group together, per day or per
    calendar month (UTC): in money and/or tokens. Checked before every model call (chat/spend/budgets.py)."""

    class Period(models.TextChoices):
        DAY = "day", "Per day"
        MONTH = "month", "Per month"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="budgets"
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budgets",
        help_text="The members' spending counts together against this limit.",
    )
    period = models.CharField(max_length=10, choices=Period.choices, default=Period.MONTH)
    max_cost = models.DecimalField(
        "spending limit (USD)",
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
    )
    max_tokens = models.PositiveBigIntegerField("token limit", null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True, group__isnull=False) | Q(user__isnull=False, group__isnull=True),
                name="budget_for_a_user_or_a_group",
            )
        ]

    def __str__(self) -> str:
        who = f"group {self.group}" if self.group_id else f"user {self.user}"
        return f"{self.get_period_display()} for {who}"

    def clean(self) -> None:
        if (self.user_id is None) == (self.group_id is None):
            raise ValidationError("Choose a user or a group (one of them).")
        if self.max_cost is None and self.max_tokens is None:
            raise ValidationError("Set a spending limit, a token limit, or both.")


class Spend(models.Model):
    """One model call's usage and price: the ledger budgets start from and admins report on."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="spend")
    model = models.ForeignKey(LLMModel, null=True, on_delete=models.SET_NULL, related_name="+")
    model_name = models.CharField(max_length=200)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField("cost (USD)", max_digits=14, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = verbose_name_plural = "spend"

    def __str__(self) -> str:
        return f"{self.model_name}: {self.prompt_tokens + self.completion_tokens} tokens"
