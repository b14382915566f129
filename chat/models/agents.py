from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from .catalog import GROUPS_HELP, LLMModel


class AgentDefinition(models.Model):
    """A subagent an admin defines; built-in agents are code (chat/agents/)."""

    name = models.CharField(max_length=60)
    slug = models.SlugField(
        max_length=40,
        unique=True,
        help_text="The model calls it as delegate_to_<slug>: lowercase letters, digits and underscores.",
    )
    description = models.CharField(max_length=300, help_text="What it is good at (the model reads this).")
    instructions = models.TextField(help_text="Its system prompt.")
    model = models.ForeignKey(
        LLMModel, null=True, blank=True, on_delete=models.SET_NULL, help_text="Empty: the chat's model."
    )
    toolsets = models.JSONField(
        default=list, blank=True, help_text='Toolset ids it may use, e.g. ["web", "exa"]; empty: none.'
    )
    max_iterations = models.PositiveSmallIntegerField(default=5)
    enabled = models.BooleanField(default=True)
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="agents", help_text=GROUPS_HELP)
    knowledge_bases = models.ManyToManyField(
        "knowledge.KnowledgeBase",
        blank=True,
        related_name="agents",
        help_text="Its Knowledge searches look in these bases only (and gives it the Knowledge tools). "
        "A user it works for searches only those of them they may see.",
    )

    class Meta:
        ordering = ["name"]
        verbose_name = "agent"

    def __str__(self) -> str:
        return self.name

    CACHE_KEY = "agent-definitions"
    # Filled in by enabled_rows(), for the cached copies.
    group_ids: frozenset[int] = frozenset()
    base_ids: tuple[int, ...] = ()

    @classmethod
    def enabled_rows(cls) -> list[AgentDefinition]:
        # Read on every chat page (the tools popover) and turn; changed rarely: cached, and
        # cleared for every process when a row is saved or deleted (see below).
        rows = cache.get(cls.CACHE_KEY)
        if rows is None:
            rows = list(cls.objects.filter(enabled=True).prefetch_related("groups", "knowledge_bases"))
            for row in rows:
                # Kept with the cached row: the group and base ids, read without a query per turn.
                row.group_ids = frozenset(group.pk for group in row.groups.all())
                row.base_ids = tuple(sorted(base.pk for base in row.knowledge_bases.all()))
            cache.set(cls.CACHE_KEY, rows)
        return rows  # type: ignore[no-any-return]


@receiver([post_save, post_delete], sender=AgentDefinition)
@receiver(m2m_changed, sender=AgentDefinition.groups.through)
@receiver(m2m_changed, sender=AgentDefinition.knowledge_bases.through)
def _forget_agents(**_: Any) -> None:
    # The cached rows carry their groups: a change of those (saved after the row by admin's
    # form) must clear them too.
    cache.delete(AgentDefinition.CACHE_KEY)
