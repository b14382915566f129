"""Budgets (chat/spend/budgets.py) against the real Redis: reservations are atomic across workers, the
turn ends with a clear message when a budget is used up, the period resets, prices come from the
admin or LiteLLM, users see what they have left and admins export the spend."""

from __future__ import annotations

import asyncio
import csv
import io
import threading
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from agent.budget import OverBudget
from agent.types import Usage
from chat.models import Budget, Chat, LLMModel, Message, Spend, Turn
from chat.spend import budgets
from chat.worker.turns import run_turn

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = [{"role": "user", "content": "x" * 400}]  # about 100 tokens
MICRO_USD = Decimal("0.000001")


def test_months_and_days_reset_at_their_ends_in_utc() -> None:
    assert budgets.period_bounds("month", datetime(2026, 11, 30, 23, 59, tzinfo=UTC)) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert budgets.period_bounds("month", datetime(2026, 12, 31, 12, tzinfo=UTC))[1] == datetime(2027, 1, 1, tzinfo=UTC)
    assert budgets.period_bounds("day", datetime(2026, 11, 30, 23, 59, tzinfo=UTC)) == (
        datetime(2026, 11, 30, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )


def test_the_admins_price_wins_then_litellms_then_none() -> None:
    gpt = LLMModel(name="GPT", model="openai/gpt-4o")
    litellm_price = budgets.price(gpt, 1_000_000, 0)
    assert litellm_price > 0
    gpt.input_price, gpt.output_price = Decimal("1.5"), Decimal("6")
    assert budgets.price(gpt, 1_000_000, 500_000) == Decimal("4.5")
    assert budgets.price(LLMModel(name="Local", model="openai/my-own-server-model"), 10**6, 10**6) == 0


def _budget_for(user: Any, llm: LLMModel, client: Any) -> budgets.RedisBudget:
    found = budgets.for_turn(user.pk, llm, redis.from_url(client), None)
    assert found is not None
    return found


def test_workers_racing_on_the_last_of_a_budget_overspend_by_at_most_one_reserve(
    user: Any, demo_model: LLMModel, redis_server: str
) -> None:
    """Eight workers (threads, each with its own event loop and Redis connection) reserve at
    once until refused; then each settles with more than it reserved would be a lie, so with
    exactly the reserve. The counter never passes the limit by more than one reserve."""
    demo_model.extra_params = {"max_tokens": 100}
    demo_model.save()
    Budget.objects.create(user=user, period="month", max_tokens=1_000)
    reserve = _budget_for(user, demo_model, redis_server).estimate(MESSAGES, None).tokens
    granted: list[int] = []
    refused: list[str] = []
    start = threading.Barrier(8)

    def worker() -> None:
        async def run() -> None:
            client = aioredis.from_url(redis_server)
            budget = budgets.RedisBudget(user.pk, demo_model, counters, client)
            start.wait()
            while True:
                try:
                    reservation = await budget.reserve(MESSAGES, None)
                except OverBudget as exc:
                    refused.append(exc.message)
                    break
                granted.append(reservation.tokens)
                await budget.settle(reservation, Usage(reservation.tokens - 100, 100))
            await client.aclose()

        asyncio.run(run())

    counters = budgets.counters_for(user.pk, redis.from_url(redis_server))
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    used = int(redis.from_url(redis_server).get(counters[0].tokens_key) or 0)
    assert len(refused) == 8 and "your monthly budget is used up" in refused[0]
    assert sum(granted) == used
    assert 1_000 <= used < 1_000 + reserve, (used, reserve)
    assert len(granted) == -(-1_000 // reserve)  # as many calls as fit, started below the limit
    # The ledger has every call; a counter started afresh from it agrees.
    assert sum(s.prompt_tokens + s.completion_tokens for s in Spend.objects.filter(user=user)) == used


def test_a_group_budget_is_shared_by_its_members(
    user: Any, other_user: Any, demo_model: LLMModel, redis_server: str
) -> None:
    staff = Group.objects.create(name="staff")
    user.groups.add(staff)
    other_user.groups.add(staff)
    Budget.objects.create(group=staff, period="day", max_tokens=10)
    mine = _budget_for(user, demo_model, redis_server)
    theirs = _budget_for(other_user, demo_model, redis_server)

    async def spend_then_try() -> None:
        mine.redis = theirs.redis = aioredis.from_url(redis_server)
        await mine.settle(await mine.reserve(MESSAGES, None), Usage(20, 5))
        await theirs.reserve(MESSAGES, None)

    with pytest.raises(OverBudget, match="the daily budget of your group staff is used up"):
        asyncio.run(spend_then_try())


def test_a_counter_starts_from_the_periods_ledger(user: Any, demo_model: LLMModel, redis_server: str) -> None:
    """After a restart of Redis, or on a budget's first use, what was spent already counts; last
    month's spending does not."""
    Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=600, completion_tokens=400)
    old = Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=5_000)
    Spend.objects.filter(pk=old.pk).update(created_at=datetime(2020, 1, 5, tzinfo=UTC))
    Budget.objects.create(user=user, period="month", max_tokens=1_000)
    budget = _budget_for(user, demo_model, redis_server)

    async def reserve() -> None:
        budget.redis = aioredis.from_url(redis_server)
        await budget.reserve(MESSAGES, None)

    with pytest.raises(OverBudget):
        asyncio.run(reserve())
    [left] = budgets.left_for(user.pk, redis.from_url(redis_server))
    assert (left.tokens_used, left.tokens_left, left.warn) == (1_000, 0, True)


def test_a_turn_over_budget_ends_with_the_message_and_keeps_the_first_step(
    user: Any, demo_model: LLMModel, redis_server: str
) -> None:
    """The real worker path: the demo model calls a tool, then would answer; the budget allows
    only the first call. The message shows live and after a reload."""
    demo_model.extra_params = {"tokens_per_second": 0, "max_tokens": 50}
    demo_model.save()
    Budget.objects.create(user=user, period="month", max_tokens=1)
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"clock_math": ["calculate"]})
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="What is 6*7?")

    asyncio.run(run_turn(turn.pk))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED and turn.error_kind == "budget"
    assert turn.error.startswith("This answer stopped: your monthly budget is used up.")
    assert turn.iterations == 1  # the tool step ran and is kept
    assert Spend.objects.filter(user=user).count() == 1
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat:detail", args=[chat.pk])).content.decode()
    assert "your monthly budget is used up" in page and 'class="tool-card' in page
    account = client.get(reverse("accounts:account")).content.decode()
    assert "Your monthly budget:" in account and "0 of 1 tokens left" in account and "Nearly used up" in account


def test_no_budget_means_no_check_and_nothing_in_redis(user: Any, demo_model: LLMModel, redis_server: str) -> None:
    assert budgets.for_turn(user.pk, demo_model, redis.from_url(redis_server), None) is None
    assert not list(redis.from_url(redis_server).scan_iter("tessera:budget:*"))
    client = Client()
    client.force_login(user)
    assert 'data-testid="budgets"' not in client.get(reverse("accounts:account")).content.decode()


def test_admins_see_spend_totals_and_export_csv(user: Any) -> None:
    staff = Group.objects.create(name="=staff")
    user.groups.add(staff)
    Spend.objects.create(user=user, model_name="openai/gpt-4o", prompt_tokens=10, completion_tokens=5, cost="0.25")
    Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=1, completion_tokens=1, cost="0")
    admin = get_user_model().objects.create_superuser("root", password="x" * 20)
    client = Client()
    client.force_login(admin)

    listing = client.get(reverse("admin:chat_spend_changelist") + f"?user__groups__id__exact={staff.pk}")
    assert listing.status_code == 200 and 'data-testid="spend-totals"' in listing.content.decode()
    totals = listing.context["spend_totals"]
    assert totals["all"]["cost"] == Decimal("0.25") and totals["all"]["prompt"] == 11

    ids = [str(pk) for pk in Spend.objects.values_list("pk", flat=True)]
    response = client.post(reverse("admin:chat_spend_changelist"), {"action": "export_csv", "_selected_action": ids})
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert response["Content-Type"].startswith("text/csv")
    assert rows[0][:4] == ["time (UTC)", "user", "groups", "model"]
    assert {row[3] for row in rows[1:]} == {"openai/gpt-4o", "demo/tessera"}
    assert all(row[2] == "'=staff" for row in rows[1:])  # never a formula in a spreadsheet


def test_a_budget_needs_one_owner_and_a_limit(user: Any) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        Budget(user=user, period="day").full_clean()
    with pytest.raises(ValidationError):
        Budget(user=user, group=Group.objects.create(name="g"), period="day", max_tokens=5).full_clean()
    Budget(user=user, period="day", max_cost=Decimal("1")).full_clean()


def test_a_new_month_starts_from_zero(user: Any, demo_model: LLMModel, redis_server: str) -> None:
    """The reset: November's spending fills November's counter; December's starts empty."""
    Budget.objects.create(user=user, period="month", max_tokens=1_000)
    Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=1_000)
    Spend.objects.filter(user=user).update(created_at=datetime(2026, 11, 20, tzinfo=UTC))
    client = redis.from_url(redis_server)

    [november] = budgets.counters_for(user.pk, client, now=datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    [december] = budgets.counters_for(user.pk, client, now=datetime(2026, 12, 1, 0, 1, tzinfo=UTC))

    assert november.tokens_key != december.tokens_key
    assert int(client.get(november.tokens_key) or 0) == 1_000
    assert int(client.get(december.tokens_key) or 0) == 0
    assert 0 < client.ttl(december.tokens_key) <= (31 + 2) * 86400 + 120
    assert december.resets == datetime(2027, 1, 1, tzinfo=UTC)


def test_two_worker_processes_racing_on_a_budget_overspend_by_at_most_one_reserve(
    stack: Any, tmp_path: Any, user: Any, demo_model: LLMModel, redis_server: str
) -> None:
    """Eight turns of one user queued at once, run by the stack's worker and a second worker
    process: their model calls race on the last of a token budget in Redis."""
    from config.celery import app
    from tests.processes import BOOT_S, Processes, wait_until

    demo_model.extra_params = {"tokens_per_second": 400, "max_tokens": 3_000}
    demo_model.save()
    processes = Processes(tmp_path / "procs", redis_url=redis_server)
    try:
        second = processes.worker("second", concurrency=8)
        node = processes.nodenames["second"]

        def answers() -> bool:
            assert second.poll() is None, processes.log("second").read_text()[-2000:]
            return bool(app.control.ping(destination=[node], timeout=0.5))

        wait_until(answers, BOOT_S, "the second worker did not answer")
        # One token: whichever call reserves first takes the whole budget; every other call,
        # in either process, must be refused, before or after that call settles.
        limit = 1
        Budget.objects.create(user=user, period="day", max_tokens=limit)
        turns = []
        for n in range(8):
            chat = Chat.objects.create(owner=user, model=demo_model)
            turn = Turn.objects.create(chat=chat, model=demo_model)
            Message.objects.create(chat=chat, turn=turn, role="user", content=f"Tell me a story {n}")
            turns.append(turn)
        for turn in turns:
            app.signature("chat.run_turn", args=(turn.pk,)).apply_async()

        def all_done() -> bool:
            return not Turn.objects.filter(pk__in=[t.pk for t in turns], status__in=Turn.ACTIVE).exists()

        wait_until(all_done, 90, "the turns did not finish")
        logged = processes.log("second").read_text() + (tmp_path / "procs" / "second.out").read_text()
        # Both processes took part (the stack's worker's log is not this test's own to read).
        assert "Task chat.run_turn" in logged
    finally:
        processes.close()

    finished = list(Turn.objects.filter(pk__in=[t.pk for t in turns]))
    refused = [t for t in finished if t.error_kind == "budget"]
    ran = [t for t in finished if t.status == Turn.Status.COMPLETED]
    assert (len(ran), len(refused)) == (1, 7), [(t.status, t.error) for t in finished]
    [spent] = Spend.objects.filter(user=user)
    # Past the limit by that one call, which used less than its reserve (3,000 tokens of answer).
    assert limit < spent.prompt_tokens + spent.completion_tokens < limit + 3_000 + 2_000


def test_the_composer_warns_near_the_end_of_a_budget(user: Any, demo_model: LLMModel, redis_server: str) -> None:
    Budget.objects.create(user=user, period="month", max_tokens=1_000)
    Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=700)
    client = Client()
    client.force_login(user)
    assert 'data-testid="composer-budget-warning"' not in client.get(reverse("chat:home")).content.decode()

    Spend.objects.create(user=user, model_name="demo/tessera", prompt_tokens=150)
    # As after a Redis restart: the counter starts again from the ledger.
    client_redis = redis.from_url(redis_server)
    client_redis.delete(*client_redis.scan_iter("tessera:budget:*"))
    page = client.get(reverse("chat:home")).content.decode()
    assert "Your monthly budget is nearly used up: 150 tokens left until" in page


def test_a_subagents_calls_are_priced_and_reserved_with_its_own_model(
    user: Any, demo_model: LLMModel, redis_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Workspace assistant runs on a model of its own (ten thousand times dearer than the
    chat's): its calls are in the ledger under that model, at that model's price, and what the
    counter holds afterwards is exactly what the ledger says."""
    from dataclasses import replace

    from chat.agents.registry import builtin_agents
    from toolsets.workspace.sample_data import seed_for_user

    demo_model.extra_params = {"tokens_per_second": 0, "max_tokens": 500}
    demo_model.input_price = demo_model.output_price = Decimal("0.01")
    demo_model.save()
    dear = LLMModel.objects.create(
        name="Dear demo",
        model="demo/tessera",
        extra_params={"tokens_per_second": 0, "max_tokens": 500},
        input_price=Decimal("100"),
        output_price=Decimal("100"),
    )
    monkeypatch.setitem(
        builtin_agents(), "workspace_assistant", replace(builtin_agents()["workspace_assistant"], model_id=dear.pk)
    )
    Budget.objects.create(user=user, period="month", max_cost=Decimal("50"))
    seed_for_user(user)
    selection = {"workspace": ["list_events", "list_tasks"], "agents": ["workspace_assistant"]}
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools=selection)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="Plan my week from my calendar and tasks")

    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    lane_calls = Message.objects.filter(turn=turn, lane="0-0", role="assistant").count()
    main_calls = Message.objects.filter(turn=turn, lane="", role="assistant").count()
    assert lane_calls >= 2 and main_calls >= 2
    sub = list(Spend.objects.filter(user=user, model=dear))
    main = list(Spend.objects.filter(user=user, model=demo_model))
    assert (len(sub), len(main)) == (lane_calls, main_calls)
    for row in sub:
        assert row.cost == budgets.price(dear, row.prompt_tokens, row.completion_tokens).quantize(MICRO_USD) > 0
    for row in main:
        assert row.cost == budgets.price(demo_model, row.prompt_tokens, row.completion_tokens).quantize(MICRO_USD)
    # Settled to the ledger: no reservation is left behind, in micro-dollars or tokens.
    [counter] = budgets.counters_for(user.pk, redis.from_url(redis_server))
    rows = Spend.objects.filter(user=user)
    assert int(redis.from_url(redis_server).get(counter.cost_key) or 0) == sum(
        int(r.cost * budgets.MICRO) for r in rows
    )
    assert int(redis.from_url(redis_server).get(counter.tokens_key) or 0) == sum(
        r.prompt_tokens + r.completion_tokens for r in rows
    )


def test_a_subagent_on_a_dearer_model_is_refused_by_the_budget_the_chats_model_fits(
    user: Any, demo_model: LLMModel, redis_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five dollars a day: the chat's model would take thousands of calls to spend it; the
    subagent's own model (a dollar a token) spends it in its first call, so its next call is
    refused and the delegation fails with the budget's reason; then the supervisor's too."""
    from dataclasses import replace

    from chat.agents.registry import builtin_agents
    from toolsets.models import ToolExecution
    from toolsets.workspace.sample_data import seed_for_user

    demo_model.extra_params = {"tokens_per_second": 0, "max_tokens": 500}
    demo_model.input_price = demo_model.output_price = Decimal("0.01")
    demo_model.save()
    dear = LLMModel.objects.create(
        name="Dear demo", model="demo/tessera", extra_params={"max_tokens": 500}, input_price=Decimal("1000000")
    )
    monkeypatch.setitem(
        builtin_agents(), "workspace_assistant", replace(builtin_agents()["workspace_assistant"], model_id=dear.pk)
    )
    Budget.objects.create(user=user, period="day", max_cost=Decimal("5"))
    seed_for_user(user)
    selection = {"workspace": ["list_events", "list_tasks"], "agents": ["workspace_assistant"]}
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools=selection)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="Plan my week from my calendar and tasks")

    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))

    delegation = ToolExecution.objects.get(turn=turn, toolset="agents")
    assert delegation.status == "error" and "your daily budget is used up" in delegation.error
    [spent] = Spend.objects.filter(model=dear)
    assert spent.cost == spent.prompt_tokens  # a dollar a token: priced with the subagent's model
    assert Message.objects.filter(turn=turn, lane="0-0", role="assistant").count() == 1
    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED and turn.error_kind == "budget"
    assert Spend.objects.filter(model=demo_model).count() == 1


def _replay_chat(user: Any, base_url: str, exchanges: int = 8) -> tuple[Chat, LLMModel]:
    from tests.chat.test_context_window import tool_heavy_chat

    model = LLMModel.objects.create(
        name="Replay", model="openai/replay", api_base=base_url, api_key="sk-x", input_price=Decimal("1")
    )
    return tool_heavy_chat(user, model, exchanges), model


def _send(chat: Chat, text: str) -> Turn:
    turn = Turn.objects.create(chat=chat, model=chat.model)
    Message.objects.create(chat=chat, turn=turn, role="user", content=text)
    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))
    turn.refresh_from_db()
    return turn


def test_the_context_summary_is_reserved_and_priced_with_the_summary_model(user: Any, redis_server: str) -> None:
    """The chat outgrows its model (the provider refuses it); the running summary written by
    the admin's summary model is one more call against the budget, priced with that model."""
    from chat.models import AppSettings
    from chat.worker.compaction import INSTRUCTIONS
    from tests.providers.replay import ReplayServer, Reply
    from tests.providers.shapes import answer, finish, role, text
    from tests.providers.shapes import usage as usage_chunk

    replay = ReplayServer().start()
    replay.window = 6000
    try:
        chat, model = _replay_chat(user, replay.base_url)
        summarizer = LLMModel.objects.create(
            name="Summarizer",
            model="openai/summarizer",
            api_base=replay.base_url,
            api_key="sk-y",
            input_price=Decimal("1000"),
            output_price=Decimal("2000"),
        )
        app = AppSettings.load()
        app.summary_model = summarizer
        app.save()
        Budget.objects.create(user=user, period="month", max_cost=Decimal("100"))
        summary = Reply([role(), text("Pages 0 to 6 were read."), finish("stop"), usage_chunk(1000, 100)])
        replay.play(summary, answer("Page 7 said page7word1."))

        turn = _send(chat, "What did page 7 say?")

        assert turn.status == Turn.Status.COMPLETED, turn.error
        assert [r.messages[0]["content"] == INSTRUCTIONS for r in replay.requests] == [False, True, False]
    finally:
        replay.stop()
    [written] = Spend.objects.filter(user=user, model=summarizer)
    assert (written.prompt_tokens, written.completion_tokens, written.cost) == (1000, 100, Decimal("1.2"))
    assert Spend.objects.filter(user=user, model=model).count() == 1
    [counter] = budgets.counters_for(user.pk, redis.from_url(redis_server))
    rows = Spend.objects.filter(user=user)
    assert int(redis.from_url(redis_server).get(counter.cost_key) or 0) == sum(
        int(r.cost * budgets.MICRO) for r in rows
    )


def test_a_summary_over_budget_is_never_asked_for_and_gives_the_turns_reserve_back(
    user: Any, redis_server: str
) -> None:
    from tests.providers.replay import ReplayServer
    from tests.providers.shapes import answer

    replay = ReplayServer().start()
    replay.window = 6000
    try:
        chat, _ = _replay_chat(user, replay.base_url)
        # One token: the first request (refused by the provider for its length) holds the budget
        # while the summary that would fit it is reserved, which is refused.
        Budget.objects.create(user=user, period="month", max_tokens=1)
        replay.play(answer("Never sent."))

        turn = _send(chat, "What did page 7 say?")

        assert len(replay.requests) == 1  # only the refused one: no summary, no retry
    finally:
        replay.stop()
    assert turn.status == Turn.Status.FAILED and turn.error_kind == "budget", turn.error
    assert "your monthly budget is used up" in turn.error
    assert not Spend.objects.filter(user=user).exists()
    # The refused call's reservation was given back: the counter is where it started.
    [counter] = budgets.counters_for(user.pk, redis.from_url(redis_server))
    assert int(redis.from_url(redis_server).get(counter.tokens_key) or 0) == 0
