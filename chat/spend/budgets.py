"""Budgets that hold: the worker's side of `agent.budget.Budget`.

Each budget (a user's, or a group's members' together; per day or calendar month, UTC) has two
Redis counters for its period: micro-dollars and tokens spent, plus what running calls have
reserved. Before a model call, one Lua script checks every counter the user falls under and, if
none is used up, adds the call's reservation to all of them — atomically, so workers racing on
the last of a budget cannot both slip through: the overspend is at most one call's reserve.
After the call the reservation is replaced by the provider's usage, and the call is recorded in
the `Spend` ledger. A counter missing from Redis (first use in its period) starts from the
ledger's sum for the period; it expires after the period, which is the reset.

A user with no budget gets no Budget object: nothing is checked or counted in Redis.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import Exists, OuterRef, Q, Sum
from django.utils import timezone

from agent.budget import OverBudget
from agent.types import Usage
from chat.models import Budget, Chat, LLMModel, Spend
from core import groups as member_groups

log = logging.getLogger(__name__)

MICRO = Decimal(1_000_000)
# What one call may write at most when the model's settings do not say (its max_tokens).
DEFAULT_MAX_OUTPUT = 4096
WARN_AT = 0.8  # share of a budget used from which people are warned

RESERVE = """
local n = #KEYS / 2
for i = 1, n do
  local max_cost = tonumber(ARGV[1 + 2 * i])
  local max_tokens = tonumber(ARGV[2 + 2 * i])
  if max_cost >= 0 and tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0') >= max_cost then return i end
  if max_tokens >= 0 and tonumber(redis.call('GET', KEYS[2 * i]) or '0') >= max_tokens then return i end
end
for i = 1, n do
  redis.call('INCRBY', KEYS[2 * i - 1], ARGV[1])
  redis.call('INCRBY', KEYS[2 * i], ARGV[2])
end
return 0
"""


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The UTC day or calendar month `now` is in: [start, end)."""
    now = now.astimezone(UTC)
    if period == Budget.Period.DAY:
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    return start, end


def price(llm: LLMModel | None, prompt_tokens: int, completion_tokens: int) -> Decimal:
    """USD for a call: the admin's price for the model, else LiteLLM's, else nothing."""
    if llm is None:
        return Decimal(0)
    if llm.input_price is not None or llm.output_price is not None:
        per_million = prompt_tokens * (llm.input_price or 0) + completion_tokens * (llm.output_price or 0)
        return Decimal(per_million) / MICRO
    import litellm

    from agent import llm as _seam  # noqa: F401 - configures LiteLLM (offline price list) first

    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=llm.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # LiteLLM raises for a model it has no price for
        return Decimal(0)
    return Decimal(str(prompt_cost + completion_cost))


@dataclass(frozen=True)
class Counter:
    budget_id: int
    label: str  # "your daily budget", "the monthly budget of your group staff"
    cost_key: str
    tokens_key: str
    max_cost: int  # micro-dollars, -1: none
    max_tokens: int  # -1: none
    resets: datetime
    who_raises: str = "your administrator can raise it"  # how the refusal ends


@dataclass(frozen=True)
class Reservation:
    cost: int
    tokens: int


def _rules(user_id: int, groups: frozenset[int] | None = None) -> list[Budget]:
    # One query for the user's own and their groups' budgets (a turn reads it once); with the
    # user's `groups` already read, a plain list instead of a subquery (cheaper to build).
    if groups is None:
        theirs = Q(group_id__in=member_groups.user_groups().filter(user_id=user_id).values("group_id"))
    else:
        theirs = Q(group_id__in=sorted(groups))
    mine = Q(user_id=user_id) | theirs
    return list(Budget.objects.filter(mine).select_related("group").order_by("id"))


def any_for(user: OuterRef) -> Exists:
    """Whether a budget applies to the user `user` points at (their own or a group's), as a
    column of the caller's query: without one, nothing else about budgets needs reading."""
    their_groups = member_groups.user_groups().filter(user_id=OuterRef(user)).values("group_id")
    return Exists(Budget.objects.filter(Q(user_id=user) | Q(group_id__in=their_groups)))


def _counter(rule: Budget, now: datetime) -> Counter:
    start, end = period_bounds(rule.period, now)
    stamp = start.strftime("%Y%m%d")
    base = f"tessera:budget:{rule.pk}:{stamp}"
    period = "daily" if rule.period == Budget.Period.DAY else "monthly"
    label = f"the {period} budget of your group {rule.group.name}" if rule.group else f"your {period} budget"
    return Counter(
        budget_id=rule.pk,
        label=label,
        cost_key=f"{base}:cost",
        tokens_key=f"{base}:tokens",
        max_cost=int(rule.max_cost * MICRO) if rule.max_cost is not None else -1,
        max_tokens=int(rule.max_tokens) if rule.max_tokens is not None else -1,
        resets=end,
    )


def _ledger_start(redis: Any, rule: Budget, counter: Counter, now: datetime) -> None:
    """Starts the period's counters from the ledger, unless another process already did."""
    if redis.exists(counter.cost_key) and redis.exists(counter.tokens_key):
        return
    start, end = period_bounds(rule.period, now)
    rows = Spend.objects.filter(created_at__gte=start, created_at__lt=end)
    rows = rows.filter(user__groups=rule.group_id) if rule.group_id else rows.filter(user_id=rule.user_id or 0)
    sums = rows.aggregate(cost=Sum("cost"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    ttl = int((end - now).total_seconds()) + 2 * 86400  # gone after its period: the reset
    redis.set(counter.cost_key, int((sums["cost"] or 0) * MICRO), nx=True, ex=ttl)
    redis.set(counter.tokens_key, (sums["prompt"] or 0) + (sums["completion"] or 0), nx=True, ex=ttl)


def counters_for(
    user_id: int, redis: Any, now: datetime | None = None, groups: frozenset[int] | None = None
) -> list[Counter]:
    """The counters a user's calls count against, started in Redis (blocking)."""
    now = now or timezone.now()
    found = []
    for rule in _rules(user_id, groups):
        counter = _counter(rule, now)
        _ledger_start(redis, rule, counter, now)
        found.append(counter)
    return found


class RedisBudget:
    """One turn's budget check (see the module's docstring)."""

    def __init__(self, user_id: int, llm: LLMModel, counters: list[Counter], redis: Any) -> None:
        self.user_id = user_id
        self.llm = llm
        self.counters = counters
        self.redis = redis
        max_tokens = (llm.extra_params or {}).get("max_tokens")
        self.max_output = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else DEFAULT_MAX_OUTPUT

    def priced_for(self, llm: LLMModel) -> RedisBudget:
        """The same counters, for calls to another model (a subagent's own, the summary model's):
        each call is reserved and priced with the model that makes it."""
        return self if llm.pk == self.llm.pk else RedisBudget(self.user_id, llm, self.counters, self.redis)

    def estimate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reservation:
        # About four characters a token: the prompt as sent, and the most the answer may be.
        prompt = len(json.dumps(messages, default=str)) // 4 + len(json.dumps(tools or [])) // 4 + 1
        cost = price(self.llm, prompt, self.max_output)
        return Reservation(cost=int(cost * MICRO) + 1, tokens=prompt + self.max_output)

    async def reserve(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reservation:
        reservation = self.estimate(messages, tools)
        keys = [key for c in self.counters for key in (c.cost_key, c.tokens_key)]
        limits = [value for c in self.counters for value in (c.max_cost, c.max_tokens)]
        refused = int(await self.redis.eval(RESERVE, len(keys), *keys, reservation.cost, reservation.tokens, *limits))
        if refused:
            counter = self.counters[refused - 1]
            raise OverBudget(
                f"This answer stopped: {counter.label} is used up. "
                f"It resets on {counter.resets:%-d %B %Y} (UTC); {counter.who_raises}."
            )
        return reservation

    async def settle(self, reservation: Reservation, usage: Usage) -> None:
        # In whole micro-dollars, as the ledger keeps it: a counter started from the ledger
        # agrees with one that counted each call.
        cost = price(self.llm, usage.prompt_tokens, usage.completion_tokens).quantize(Decimal(1) / MICRO)
        cost_delta = int(cost * MICRO) - reservation.cost
        tokens_delta = usage.total - reservation.tokens
        pipe = self.redis.pipeline(transaction=True)
        for counter in self.counters:
            pipe.incrby(counter.cost_key, cost_delta)
            pipe.incrby(counter.tokens_key, tokens_delta)
        await pipe.execute()
        if usage.total > 0:
            await sync_to_async(Spend.objects.create, thread_sensitive=False)(
                user_id=self.user_id,
                model=self.llm,
                model_name=self.llm.model[:200],
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cost=cost,
            )


def for_turn(
    user_id: int,
    llm: LLMModel,
    sync_redis: Any,
    async_redis: Any,
    groups: frozenset[int] | None = None,
    *,
    budgeted: bool = True,
    extra: list[Counter] | None = None,
) -> RedisBudget | None:
    """The turn's budget check, or None when no budget applies (blocking). `groups`: the
    user's, when the caller has read them already; `budgeted` False: the caller knows none of
    the user's applies (nothing is read); `extra`: counters beyond the user's (`run_counters`)."""
    counters = (counters_for(user_id, sync_redis, groups=groups) if budgeted else []) + (extra or [])
    return RedisBudget(user_id, llm, counters, async_redis) if counters else None


def run_counters(chat_id: int, sync_redis: Any) -> list[Counter]:
    """The budgets a run's calls count against besides its owner's: its automation's, asked of
    the floor that runs chats (chat/signals.py); call for chats marked `automated` only."""
    from chat import signals

    found: list[Counter] = []
    for _receiver, answer in signals.run_budgets.send_robust(Chat, chat_id=chat_id, redis=sync_redis):
        if isinstance(answer, Exception):
            log.error("Reading a run's budget failed", exc_info=answer)
        elif isinstance(answer, list):
            found.extend(answer)
    return found


@dataclass(frozen=True)
class Left:
    label: str
    resets: datetime
    cost_used: Decimal | None
    cost_limit: Decimal | None
    tokens_used: int | None
    tokens_limit: int | None

    @property
    def share_used(self) -> float:
        shares = []
        if self.cost_limit is not None and self.cost_used is not None:
            shares.append(float(self.cost_used / self.cost_limit) if self.cost_limit else 1.0)
        if self.tokens_limit is not None and self.tokens_used is not None:
            shares.append(self.tokens_used / self.tokens_limit if self.tokens_limit else 1.0)
        return max(shares, default=0.0)

    @property
    def warn(self) -> bool:
        return self.share_used >= WARN_AT

    @property
    def cost_left(self) -> Decimal | None:
        if self.cost_limit is None or self.cost_used is None:
            return None
        return max(Decimal(0), self.cost_limit - self.cost_used)

    @property
    def tokens_left(self) -> int | None:
        if self.tokens_limit is None or self.tokens_used is None:
            return None
        return max(0, self.tokens_limit - self.tokens_used)


def left_for(user_id: int, redis: Any, groups: frozenset[int] | None = None) -> list[Left]:
    """What the user has left of each budget they fall under (blocking)."""
    found = []
    for counter in counters_for(user_id, redis, groups=groups):
        cost = int(redis.get(counter.cost_key) or 0)
        tokens = int(redis.get(counter.tokens_key) or 0)
        found.append(
            Left(
                label=counter.label[0].upper() + counter.label[1:],
                resets=counter.resets,
                cost_used=Decimal(cost) / MICRO if counter.max_cost >= 0 else None,
                cost_limit=Decimal(counter.max_cost) / MICRO if counter.max_cost >= 0 else None,
                tokens_used=tokens if counter.max_tokens >= 0 else None,
                tokens_limit=counter.max_tokens if counter.max_tokens >= 0 else None,
            )
        )
    return found
