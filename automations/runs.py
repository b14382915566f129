"""A run's life, told by its turn (chat/signals.py): queued → running → (waiting ⇄ running) →
completed or failed. A run is completed only when its turn ended completed (`Turn.close`), never
before.

Retry policy: a run whose turn was interrupted (its worker died or shut down) or failed for a
passing reason (provider rate limit, timeout, connection, unavailable, internal error) is tried
once more at once, as a new turn in the same chat. A second failure, or one that retrying cannot
fix (no model, a model not open to the owner, an agent gone or no longer open to the owner, a
budget, a stop by the owner), fails the run.
The retry is claimed with a conditional UPDATE on the run (attempts 1 → 2, still on the ended
turn), so the reaper and a redelivered task closing the same turn can never start two."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.dispatch import receiver
from django.utils import timezone

from chat import signals
from chat.agents import AgentSpec
from chat.agents.registry import working_selection
from chat.exchanges import start_turn
from chat.models import Chat, LLMModel, Turn
from chat.spend.budgets import period_bounds, price
from knowledge import access
from knowledge.models import ChatBase
from notifications.models import Notification
from notifications.service import notify

from . import agents, live, prompts
from .models import Automation, AutomationLimits, AutomationRun

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 2
RETRYABLE = {"rate_limited", "timeout", "connection", "unavailable", "internal", "interrupted", "provider_error"}
OVER_BUDGET = "This automation has used its monthly budget; it runs again next month or when the budget is raised."


def run_url(run: AutomationRun) -> str:
    return f"/automations/{run.automation_id}/"


def spent_this_month(automation: Automation) -> Decimal:
    start, _ = period_bounds("month", timezone.now())
    total = AutomationRun.objects.filter(automation=automation, created_at__gte=start).aggregate(s=Sum("cost"))["s"]
    return total or Decimal(0)


def allowed_tools(automation: Automation, agent: AgentSpec | None = None) -> dict[str, Any]:
    """The run's tool selection — the agent's own toolsets when it has some, else the
    automation's — less toolsets the admin's limits no longer allow."""
    allowed = AutomationLimits.load().allowed_toolsets
    own = dict(automation.enabled_tools or {})
    chosen = working_selection(agent, lambda: own) if agent is not None else own
    return {k: v for k, v in chosen.items() if k in allowed} if allowed else chosen


def _model_of(automation: Automation, agent: AgentSpec | None) -> LLMModel | None:
    """The agent's own model when it fixes one open to the owner (as the worker will answer with
    it, so the run is priced by it), else the automation's (None: the owner's default)."""
    if agent is not None and agent.model_id:
        own = LLMModel.for_user(automation.owner_id).filter(pk=agent.model_id).first()
        if own is not None:
            return own
    return automation.model


def start(run: AutomationRun) -> None:
    """The run's chat (in the owner's list, marked a run: `Chat.automated`, its badge from
    automations/marks.py) and first turn, inside the caller's transaction: the turn goes to the
    workers once it commits. A run over its automation's monthly budget fails at once instead;
    one that crosses it while it runs stops at its next model call (marks.budgets)."""
    automation = run.automation
    live.changed(automation.pk)
    if automation.monthly_budget and spent_this_month(automation) >= automation.monthly_budget:
        _end(run, AutomationRun.Status.FAILED, OVER_BUDGET)
        return
    agent: AgentSpec | None = None
    if automation.agent:
        # The agent may have been deleted, turned off, limited to other groups or kept out by
        # the admin's limits since the automation was saved: the run fails saying so.
        agent, why = agents.resolve(automation.owner_id, automation.agent)
        if agent is None:
            _end(run, AutomationRun.Status.FAILED, why)
            return
    model = _model_of(automation, agent)
    when = timezone.localtime(run.slot or timezone.now()).strftime("%Y-%m-%d %H:%M")
    chat = Chat.objects.create(
        owner_id=automation.owner_id,
        model=model,
        enabled_tools=allowed_tools(automation, agent),
        title=f"{automation.name} · {when}"[:200],
        automated=True,
        # Held as the agent like a conversation with it: every turn of the chat (this run's, its
        # retry, what the owner sends after) answers with the agent's instructions, iteration
        # limit and knowledge scope, or fails saying why if it is gone by then (chat/worker).
        agent=agent.id if agent is not None else "",
    )
    readable = access.visible(automation.owner_id).filter(pk__in=automation.knowledge_bases.values("pk"))
    ChatBase.objects.bulk_create([ChatBase(chat=chat, base=base) for base in readable])
    _message, turn = start_turn(chat, prompts.for_run(automation, run), parent=None, model=model)
    AutomationRun.objects.filter(pk=run.pk).update(chat=chat, turn=turn, attempts=1)
    run.chat, run.turn, run.attempts = chat, turn, 1


def _run_of(turn_id: int) -> AutomationRun | None:
    return AutomationRun.objects.select_related("automation").filter(turn_id=turn_id).first()


# Each receiver returns at once for a turn whose chat is not a run (`automated` False): an
# ordinary turn pays no query for automations. None (not known to the sender) looks.


@receiver(signals.turn_started)
def _started(sender: Any, turn_id: int, automated: bool | None = None, **_: Any) -> None:
    if automated is False:
        return
    _moved(turn_id, AutomationRun.Status.QUEUED, AutomationRun.Status.RUNNING)


def _moved(turn_id: int, was: str, now: str) -> AutomationRun | None:
    """The turn's run, if it was `was` and is `now` now (its page told)."""
    run = _run_of(turn_id)
    if run is None or not AutomationRun.objects.filter(pk=run.pk, status=was).update(status=now):
        return None
    live.changed(run.automation_id)
    return run


@receiver(signals.question_opened)
def _waiting(sender: Any, turn_id: int, title: str = "", automated: bool | None = None, **_: Any) -> None:
    if automated is False:
        return
    run = _moved(turn_id, AutomationRun.Status.RUNNING, AutomationRun.Status.WAITING)
    if run is None:
        return
    automation = run.automation
    if automation.notify_on in (Automation.Notify.ALWAYS, Automation.Notify.WAITING):
        notify(
            automation.owner_id,
            Notification.Kind.RUN_WAITING,
            f"“{automation.name}” waits for your approval",
            f"The run asks to use {title or 'a tool'}. Open it to approve or deny.",
            f"/chats/{run.chat_id}/" if run.chat_id else run_url(run),
        )


@receiver(signals.question_closed)
def _answered(sender: Any, turn_id: int, automated: bool | None = None, **_: Any) -> None:
    if automated is False:
        return
    _moved(turn_id, AutomationRun.Status.WAITING, AutomationRun.Status.RUNNING)


@receiver(signals.turn_closed)
def _closed(sender: Any, turn_id: int, status: str, error: str = "", automated: bool | None = None, **_: Any) -> None:
    if automated is False:
        return
    run = _run_of(turn_id)
    if run is None or run.finished:
        return
    turn = Turn.objects.select_related("model").filter(pk=turn_id).first()
    cost = run.cost + (_turn_cost(turn) if turn is not None else Decimal(0))
    AutomationRun.objects.filter(pk=run.pk).update(cost=cost)
    run.cost = cost
    if status == Turn.Status.COMPLETED:
        _end(run, AutomationRun.Status.COMPLETED, "")
        return
    kind = (turn.error_kind if turn is not None else "") or ("interrupted" if status == Turn.Status.INTERRUPTED else "")
    if status == Turn.Status.CANCELLED:
        error = "Stopped by its owner."
    if status != Turn.Status.CANCELLED and kind in RETRYABLE and run.attempts < MAX_ATTEMPTS and _retry(run, turn_id):
        return
    _end(run, AutomationRun.Status.FAILED, error or "The run's turn ended without an answer.")


def _turn_cost(turn: Turn) -> Decimal:
    usage = turn.usage or {}
    return price(turn.model, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def _retry(run: AutomationRun, ended_turn_id: int) -> bool:
    with transaction.atomic():
        claimed = AutomationRun.objects.filter(pk=run.pk, attempts=run.attempts, turn_id=ended_turn_id).update(
            attempts=run.attempts + 1, status=AutomationRun.Status.QUEUED
        )
        if not claimed:
            return True  # another closer of the same turn retried it
        chat = Chat.objects.select_for_update().get(pk=run.chat_id or 0)
        prompt = prompts.retry_prompt()
        ended = Turn.objects.get(pk=ended_turn_id)
        # A chat held as an agent keeps the model the first attempt had (the agent's own, maybe).
        model = ended.model if chat.agent else (run.automation.model or _open_model(ended))
        _message, turn = start_turn(chat, prompt, parent=ended, model=model)
        AutomationRun.objects.filter(pk=run.pk).update(turn=turn)
        live.changed(run.automation_id)
    log.warning("Run %s: turn %s ended early; retried once as turn %s", run.pk, ended_turn_id, turn.pk)
    return True


def _open_model(turn: Turn) -> LLMModel | None:
    return turn.model


def _end(run: AutomationRun, status: str, error: str) -> None:
    if (
        not AutomationRun.objects.filter(pk=run.pk)
        .exclude(status__in=["completed", "failed"])
        .update(status=status, error=error, finished_at=timezone.now())
    ):
        return
    live.changed(run.automation_id)
    automation = run.automation
    failed = status == AutomationRun.Status.FAILED
    wanted = automation.notify_on == Automation.Notify.ALWAYS or (
        failed and automation.notify_on in (Automation.Notify.FAILURE, Automation.Notify.WAITING)
    )
    if not wanted:
        return
    link = f"/chats/{run.chat_id}/" if run.chat_id else run_url(run)
    if failed:
        notify(automation.owner_id, Notification.Kind.RUN_FAILED, f"“{automation.name}” failed", error, link)
    else:
        notify(automation.owner_id, Notification.Kind.RUN_COMPLETED, f"“{automation.name}” finished", "", link)
