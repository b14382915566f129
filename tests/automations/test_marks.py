"""A run's chat is marked a run (not by its title) and shows its badge in the chat list and its
header; an ordinary turn pays no query for automations; an automation's page hears of its runs
live over its own socket (its owner's or an admin's only); and an automation's monthly budget
holds during a run like a user's: the run crossing it stops at its next model call and fails
saying why."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from automations import runs, scheduler
from automations.models import Automation, AutomationRun
from chat.models import Chat, Message, Spend, Turn
from chat.worker.turns import run_turn
from config.asgi import application

from .test_runs import T0, _minutely

pytestmark = pytest.mark.django_db(transaction=True)


def _id(value: int | None) -> int:
    assert value is not None
    return value


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _run(owner: Any, model: Any, **fields: Any) -> AutomationRun:
    _minutely(owner, model, **fields)
    return AutomationRun.objects.get(pk=scheduler.tick(T0 + timedelta(minutes=1))[0])


def test_a_run_chat_is_marked_and_shows_its_badge_in_the_list_and_header(
    user: Any, demo_model: Any, sent: list[int]
) -> None:
    run = _run(user, demo_model)
    chat = Chat.objects.get(pk=_id(run.chat_id))
    assert chat.automated and chat.title.startswith("Stale tasks · ") and "Run ·" not in chat.title
    plain = Chat.objects.create(owner=user, title="Just a chat")
    client = _client(user)

    page = client.get(f"/chats/{chat.pk}/").content.decode()
    url = f"/automations/{run.automation_id}/"
    # In the list and in the header: the automation's name, its page, the run's status.
    assert page.count('data-testid="run-badge"') == 2
    assert page.count(f'href="{url}" data-testid="run-badge" data-status="queued"') == 2
    assert ">Stale tasks</span>" in page and "Queued</span>" in page

    Turn.claim(_id(run.turn_id))
    other = client.get(f"/chats/{plain.pk}/").content.decode()
    assert other.count('data-testid="run-badge"') == 1 and 'data-status="running"' in other

    # The automation deleted: the chat stays a run, a badge without a link.
    Automation.objects.all().delete()
    gone = client.get(f"/chats/{chat.pk}/").content.decode()
    assert gone.count('data-status="gone"') == 2 and "automation deleted" in gone


def test_a_list_without_runs_asks_nothing_about_them(user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Plain")
    client = _client(user)
    client.get(f"/chats/{chat.pk}/")  # warm caches
    with CaptureQueriesContext(connection) as seen:
        page = client.get(f"/chats/{chat.pk}/").content.decode()
    assert 'data-testid="run-badge"' not in page
    assert not [q["sql"] for q in seen.captured_queries if "automations_" in q["sql"]]


def test_an_ordinary_turn_pays_no_query_for_automations(user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    with CaptureQueriesContext(connection) as seen:
        claimed = Turn.claim(turn.pk)
        assert claimed is not None
        claimed.close(Turn.Status.COMPLETED)
    queued = Turn.objects.create(chat=chat, model=demo_model)
    with CaptureQueriesContext(connection) as stopped:
        assert Turn.cancel_if_queued(queued.pk)
    about_runs = [q["sql"] for q in [*seen.captured_queries, *stopped.captured_queries] if "automations_" in q["sql"]]
    assert about_runs == []


def test_a_runs_turn_still_moves_its_run(user: Any, demo_model: Any, sent: list[int]) -> None:
    run = _run(user, demo_model)
    with CaptureQueriesContext(connection) as seen:
        claimed = Turn.claim(_id(run.turn_id))
        assert claimed is not None
        claimed.close(Turn.Status.COMPLETED)
    assert any("automations_" in q["sql"] for q in seen.captured_queries)
    run.refresh_from_db()
    assert run.status == "completed"


def _cookie(user: Any) -> bytes:
    client = _client(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def _socket(cookie: bytes, automation_id: int) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)]
    return WebsocketCommunicator(application, f"/ws/automations/{automation_id}/", headers=headers)


def test_the_automation_page_hears_of_new_runs_and_status_changes_live(
    user: Any, other_user: Any, admin_user: Any, demo_model: Any, sent: list[int]
) -> None:
    automation = _minutely(user, demo_model)
    mine, theirs, admins = _cookie(user), _cookie(other_user), _cookie(admin_user)
    page = _client(user).get(f"/automations/{automation.pk}/").content.decode()
    assert f'ws-connect="/ws/automations/{automation.pk}/"' in page and "No runs yet." in page

    async def watch() -> tuple[list[str], Any, str]:
        owner, stranger, admin = (_socket(c, automation.pk) for c in (mine, theirs, admins))
        assert (await owner.connect())[0] and (await admin.connect())[0]
        assert (await stranger.connect())[0]
        refused = await stranger.receive_output(timeout=5)  # accepted, then closed: not theirs
        frames = []
        ticked = await sync_to_async(scheduler.tick)(T0 + timedelta(minutes=1))
        frames.append(await owner.receive_from(timeout=10))  # the new run, queued
        run = await sync_to_async(AutomationRun.objects.get)(pk=ticked[0])
        await sync_to_async(Turn.claim)(_id(run.turn_id))
        frames.append(await owner.receive_from(timeout=10))  # running
        admin_frame = await admin.receive_from(timeout=10)
        await owner.disconnect()
        await admin.disconnect()
        return frames, refused, admin_frame

    frames, refused, admin_frame = asyncio.run(watch())
    assert refused == {"type": "websocket.close", "code": 4404}
    assert all('id="auto-runs" hx-swap-oob="true"' in f for f in frames)
    assert 'data-status="queued"' in frames[0] and 'data-status="running"' in frames[1]
    assert 'data-testid="run"' in admin_frame


def test_a_run_crossing_its_automations_budget_stops_and_fails_saying_why(
    user: Any, demo_model: Any, redis_server: str, sent: list[int]
) -> None:
    """The real worker path: the demo model calls a tool, then would answer; the automation's
    budget (the owner has none of their own) allows the first call only."""
    demo_model.extra_params = {"tokens_per_second": 0, "max_tokens": 50}
    demo_model.input_price = Decimal(1)  # USD a million tokens: a call costs a few thousandths of a cent
    demo_model.output_price = Decimal(1)
    demo_model.save()
    automation = _minutely(user, demo_model, monthly_budget=Decimal("0.0001"))
    automation.enabled_tools = {"clock_math": ["calculate"]}
    automation.prompt = "What is 6*7?"
    automation.save()
    run = _run_started(automation)
    assert run.status == "queued"  # under its budget when it started

    asyncio.run(asyncio.wait_for(run_turn(_id(run.turn_id)), 60))

    turn = Turn.objects.get(pk=_id(run.turn_id))
    assert turn.status == Turn.Status.FAILED and turn.error_kind == "budget"
    assert turn.iterations == 1  # the tool step ran, the next call was refused
    assert Spend.objects.filter(user=user).count() == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.cost > Decimal("0.0001")
    assert run.error.startswith("This answer stopped: the monthly budget of the automation “Stale tasks” is used up.")
    assert "you can raise it on the automation's page" in run.error
    assert Message.objects.filter(turn=turn, role="tool").exists()
    # The counter is the automation's, in Redis, at what the month's runs cost.
    keys = list(redis.from_url(redis_server).scan_iter(f"tessera:budget:automation:{automation.pk}:*"))
    assert len(keys) == 2


def _run_started(automation: Automation) -> AutomationRun:
    from django.db import transaction

    with transaction.atomic():
        run = AutomationRun.objects.create(automation=automation, origin=AutomationRun.Origin.MANUAL)
        runs.start(run)
    run.refresh_from_db()
    return run
