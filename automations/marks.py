"""What chat asks of a run's chat (chat/signals.py), answered here: the badge the chat list and
the chat's header show (the automation, its page, the run's status), and the automation's
monthly budget as a counter the run's calls are checked against, like the owner's own budgets
(chat/spend/budgets.py): a run that crosses it stops at its next model call and fails with why."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver
from django.urls import reverse
from django.utils import timezone

from chat import signals
from chat.spend.budgets import MICRO, Counter, period_bounds

from .models import Automation, AutomationRun


@receiver(signals.run_badges)
def badges(sender: Any, chat_ids: list[int], **_: Any) -> dict[int, signals.RunBadge]:
    rows = (
        AutomationRun.objects.filter(chat_id__in=chat_ids)
        .select_related("automation")
        .only("chat_id", "status", "automation__name")
        .order_by("id")  # a chat holds one run; the latest would win anyway
    )
    return {
        run.chat_id: signals.RunBadge(
            name=run.automation.name,
            url=reverse("automations:detail", args=[run.automation_id]),
            status=run.status,
            status_label=run.get_status_display(),
        )
        for run in rows
        if run.chat_id is not None
    }


@receiver(signals.run_budgets)
def budgets(sender: Any, chat_id: int, redis: Any, **_: Any) -> list[Counter]:
    run = AutomationRun.objects.filter(chat_id=chat_id).select_related("automation").order_by("-id").first()
    if run is None or not run.automation.monthly_budget:
        return []
    return [counter(run.automation, redis)]


def counter(automation: Automation, redis: Any) -> Counter:
    """The automation's monthly budget as a Redis counter, started (unless another process did)
    from what its runs cost this month; its tokens are counted, never limited."""
    from .runs import spent_this_month

    now = timezone.now()
    start, end = period_bounds("month", now)
    base = f"tessera:budget:automation:{automation.pk}:{start:%Y%m%d}"
    found = Counter(
        budget_id=0,
        label=f"the monthly budget of the automation “{automation.name}”",
        cost_key=f"{base}:cost",
        tokens_key=f"{base}:tokens",
        max_cost=int(automation.monthly_budget * MICRO),
        max_tokens=-1,
        resets=end,
        who_raises="you can raise it on the automation's page",
    )
    if not (redis.exists(found.cost_key) and redis.exists(found.tokens_key)):
        ttl = int((end - now).total_seconds()) + 2 * 86400  # gone after its month: the reset
        redis.set(found.cost_key, int(spent_this_month(automation) * MICRO), nx=True, ex=ttl)
        redis.set(found.tokens_key, 0, nx=True, ex=ttl)
    return found
