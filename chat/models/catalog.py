from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from core import groups as member_groups
from core.crypto import EncryptedTextField, mask

DEMO_MODEL = "demo/tessera"


GROUPS_HELP = "Only members of these groups may use it; none chosen: everyone."


def open_to(model: type[models.Model], user_id: int | None, groups: frozenset[int] | None = None) -> Q:
    """Rows of `model` (with a `groups` field) open to the user: limited to no group, or to one of
    theirs. Subqueries rather than a join, so a row in two of the user's groups comes once.
    With the user's `groups` already read, a plain list of them instead of their subquery."""
    through = model._meta.get_field("groups").remote_field.through  # type: ignore[union-attr]
    column = f"{model._meta.model_name}_id"
    limited = through.objects.values(column)
    # The user's groups as a subquery too: the whole check is part of the caller's one query.
    user_groups: Any = (
        sorted(groups) if groups is not None else member_groups.user_groups().filter(user_id=user_id).values("group_id")
    )
    mine = through.objects.filter(group_id__in=user_groups).values(column)
    return ~Q(pk__in=limited) | Q(pk__in=mine)


class LLMModel(models.Model):
    """A model an admin makes available. Any LiteLLM model string works."""

    name = models.CharField("display name", max_length=100)
    model = models.CharField(
        "LiteLLM model",
        max_length=200,
        help_text="e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5, ollama_chat/llama3.1, "
        "or openai/<name> with an API base for any OpenAI-compatible server.",
    )
    api_base = models.URLField("API base", blank=True, max_length=500)
    api_key = EncryptedTextField("API key", blank=True)
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(
        "default", default=False, help_text="Used for new chats. Without one, the newest enabled model is used."
    )
    extra_params = models.JSONField(
        default=dict, blank=True, help_text='Passed to LiteLLM as is, e.g. {"temperature": 0.2}.'
    )
    context_window = models.PositiveIntegerField(
        "context window",
        null=True,
        blank=True,
        help_text="Input tokens the model takes. Empty: from LiteLLM's model information.",
    )
    answer_reserve = models.PositiveIntegerField(
        "answer reserve",
        null=True,
        blank=True,
        help_text="Tokens of the context window kept free for the answer. Empty: the answer length "
        "asked for in the extra parameters (max_tokens), else the model's, at most 4096.",
    )
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="llm_models", help_text=GROUPS_HELP)
    # For budgets: the admin's price wins; without one, LiteLLM's price list; without that, free.
    input_price = models.DecimalField(
        "input price (USD per million tokens)",
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="For budgets, when LiteLLM has no price for this model (or to override it).",
    )
    output_price = models.DecimalField(
        "output price (USD per million tokens)",
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "LLM model"
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True), name="one_default_model")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def masked_key(self) -> str:
        return mask(self.api_key)

    @property
    def is_demo(self) -> bool:
        return self.model.startswith("demo/")

    @classmethod
    def for_user(cls, user_id: int | None, groups: frozenset[int] | None = None) -> models.QuerySet[LLMModel]:
        """The enabled models this user may choose: the picker's list and the forms' choices."""
        return cls.objects.filter(enabled=True).filter(open_to(cls, user_id, groups))

    def open_to(
        self, user_id: int | None, groups: frozenset[int] | None = None, limited_to: Iterable[int] | None = None
    ) -> bool:
        """Whether the user may use this model. With the user's `groups` already read (a turn
        reads them once), one plain query of the model's groups instead of the subqueries; none
        with the model's groups read too (`limited_to`: the groups it is limited to)."""
        if groups is None:
            return LLMModel.for_user(user_id).filter(pk=self.pk).exists()
        # `enabled` as read with the row, moments ago (the turn's claim).
        if not self.enabled:
            return False
        if limited_to is None:
            limited_to = LLMModel.groups.through.objects.filter(llmmodel_id=self.pk).values_list("group_id", flat=True)
        return member_groups.allows(limited_to, groups)

    @classmethod
    def default(cls, user_id: int | None = None) -> LLMModel | None:
        """The default among the models open to `user_id` (one query)."""
        return cls.choose_default(list(cls.for_user(user_id)))

    @staticmethod
    def choose_default(models: list[LLMModel]) -> LLMModel | None:
        """Of these (enabled) models: the explicit default; else the newest real one; else the
        first (the offline demo)."""
        real = [m for m in models if not m.is_demo]
        return (
            next((m for m in models if m.is_default), None)
            or max(real, key=lambda m: m.created_at, default=None)
            or (models[0] if models else None)
        )

    def litellm_kwargs(self) -> dict[str, Any]:
        extra = dict(self.extra_params or {})
        if self.is_demo and "tokens_per_second" not in extra:
            extra["tokens_per_second"] = settings.TESSERA["DEMO_TOKENS_PER_SECOND"]
        return extra
