"""An automation held as an agent: the form offers only the agents its owner may use (groups,
the admin's automation limits) and refuses any other clearly; a run answers through the real
worker with the agent's instructions, toolsets and model; an agent gone or kept out since fails
the run saying why; and the list of automations shows each one's agent and latest run, live."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client

from automations import runs
from automations.forms import AutomationForm
from automations.models import Automation, AutomationLimits, AutomationRun
from chat.models import AgentDefinition, LLMModel, Turn
from chat.worker import turns
from chat.worker.request import TurnRequest
from chat.worker.turns import AGENT_GONE_ERROR, run_turn
from config.asgi import application
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db(transaction=True)

INSTRUCTIONS = "You are the clock expert of the Tokyo office."


@pytest.fixture
def clock_expert(db: Any) -> AgentDefinition:
    return AgentDefinition.objects.create(
        name="Clock expert",
        slug="clock_expert",
        description="Times and dates",
        instructions=INSTRUCTIONS,
        toolsets=["clock_math"],
        max_iterations=3,
    )


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


FORM = {"name": "Tokyo time", "prompt": "What time is it in Tokyo?", "agent": "clock_expert",
        "trigger": "schedule", "schedule": "0 8 * * 1-5", "timezone": "UTC", "enabled": "on",
        "notify_on": "failure", "monthly_budget": "0"}  # fmt: skip


def _automation(owner: Any, model: Any, **fields: Any) -> Automation:
    values = {"name": "Tokyo time", "prompt": "What time is it in Tokyo?", "model": model, "agent": "clock_expert",
              "trigger": "webhook", **fields}  # fmt: skip
    return Automation.objects.create(owner=owner, **values)


def _started(automation: Automation) -> AutomationRun:
    with transaction.atomic():
        run = AutomationRun.objects.create(automation=automation, origin=AutomationRun.Origin.MANUAL)
        runs.start(run)
    run.refresh_from_db()
    return run


def test_the_form_offers_the_agents_the_owner_may_use_and_refuses_any_other(
    user: Any, demo_model: Any, clock_expert: AgentDefinition
) -> None:
    timekeepers = Group.objects.create(name="Timekeepers")
    clock_expert.groups.add(timekeepers)
    offered = dict(AutomationForm(user=user, instance=Automation(owner=user)).fields["agent"].choices)  # type: ignore[attr-defined]
    assert "researcher" in offered and "clock_expert" not in offered and offered[""] == "None: the model alone"
    client = _client(user)
    # Posted by hand all the same: a clear form error, nothing saved.
    refused = client.post("/automations/new/", FORM)
    assert refused.status_code == 400 and "That agent is not available to you" in refused.content.decode()
    assert client.post("/automations/new/", {**FORM, "agent": "no_such_agent"}).status_code == 400
    assert not Automation.objects.exists()

    user.groups.add(timekeepers)
    saved = client.post("/automations/new/", FORM)
    assert saved.status_code == 302
    automation = Automation.objects.get()
    assert automation.agent == "clock_expert"
    page = client.get(f"/automations/{automation.pk}/").content.decode()
    assert 'data-testid="automation-agent">Clock expert<' in page
    assert "The agent's own: Clock &amp; math" in page  # its tools, not the automation's choice
    assert "Agent: Clock expert" in client.get("/automations/").content.decode()

    # The admin keeps automations to the researcher: the clock expert is neither offered nor kept.
    limits = AutomationLimits.load()
    limits.allowed_agents = ["researcher"]
    limits.save()
    edit = client.post(f"/automations/{automation.pk}/edit/", FORM)
    assert edit.status_code == 400
    assert "An administrator does not allow automations to run as the agent “Clock expert”." in edit.content.decode()
    assert client.post(f"/automations/{automation.pk}/edit/", {**FORM, "agent": "researcher"}).status_code == 302
    assert Automation.objects.get().agent == "researcher"


def test_the_admin_limit_names_only_known_agents(admin_user: Any) -> None:
    from automations.admin import AutomationLimitsForm

    fields = {"max_per_user": 10, "min_interval_minutes": 5, "allowed_toolsets": "[]"}
    bad = AutomationLimitsForm(data={**fields, "allowed_agents": '["researcher", "nope"]'})
    assert not bad.is_valid() and "No agent has the id nope" in str(bad.errors["allowed_agents"])
    assert AutomationLimitsForm(data={**fields, "allowed_agents": '["researcher"]'}).is_valid()


def test_a_run_as_an_agent_answers_with_its_instructions_tools_and_model(
    user: Any, demo_model: Any, clock_expert: AgentDefinition, sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    own = LLMModel.objects.create(
        name="Clock model", model="demo/clock", enabled=True, extra_params={"tokens_per_second": 0}
    )
    clock_expert.model = own
    clock_expert.save()
    # The automation's own tool choice gives way to the agent's toolsets, as in a chat with it.
    automation = _automation(user, demo_model, enabled_tools={"workspace": ["list_tasks"]})
    run = _started(automation)
    assert run.status == "queued" and run.chat is not None and run.turn is not None
    assert run.chat.enabled_tools.keys() == {"clock_math"}
    assert (run.turn.model, run.chat.model) == (own, own)  # the agent's model, open to the owner
    assert run.chat.agent == "clock_expert" and TurnRequest.of(run.turn) is None  # the chat's own turn

    prompts: list[list[dict[str, Any]]] = []

    class Watched(turns.Agent):  # the real loop, its first messages kept
        async def run(self, messages: list[dict[str, Any]]) -> Any:
            prompts.append(messages)
            return await super().run(messages)

    monkeypatch.setattr(turns, "Agent", Watched)
    asyncio.run(asyncio.wait_for(run_turn(run.turn.pk), 60))

    turn = Turn.objects.get(pk=run.turn.pk)
    assert turn.status == "completed", turn.error
    system = prompts[0][0]
    assert system["role"] == "system" and system["content"].startswith(INSTRUCTIONS)
    assert prompts[0][-1] == {"role": "user", "content": "What time is it in Tokyo?"}
    used = set(ToolExecution.objects.filter(turn=turn).values_list("toolset", "status"))
    assert used == {("clock_math", "success")}
    run.refresh_from_db()
    assert run.status == "completed"

    # What the owner sends after, in the run's chat, is answered by the same agent.
    sent_now = _client(user).post(f"/chats/{run.chat.pk}/messages/", {"content": "And in Paris?"})
    assert sent_now.status_code < 400
    follow_up = Turn.objects.filter(chat=run.chat).exclude(pk=turn.pk).get()
    asyncio.run(asyncio.wait_for(run_turn(follow_up.pk), 60))
    assert Turn.objects.get(pk=follow_up.pk).status == "completed"
    assert prompts[1][0]["content"].startswith(INSTRUCTIONS)


def test_a_run_whose_agent_is_kept_out_or_gone_fails_saying_why(
    user: Any, demo_model: Any, clock_expert: AgentDefinition, sent: list[int]
) -> None:
    automation = _automation(user, demo_model)
    limits = AutomationLimits.load()
    limits.allowed_agents = ["researcher"]
    limits.save()
    kept_out = _started(automation)
    assert kept_out.status == "failed" and kept_out.chat is None and sent == []
    assert kept_out.error == "An administrator does not allow automations to run as the agent “Clock expert”."
    limits.allowed_agents = []
    limits.save()

    clock_expert.groups.add(Group.objects.create(name="Timekeepers"))
    limited = _started(automation)
    assert limited.status == "failed" and "is not available to you: Not available to your groups" in limited.error

    clock_expert.delete()
    gone = _started(automation)
    assert gone.status == "failed" and gone.chat is None and sent == []
    assert gone.error == "The agent “clock_expert” no longer exists (an administrator deleted or turned it off)."
    assert 'data-status="failed"' in _client(user).get("/automations/").content.decode()


def test_an_agent_deleted_while_its_run_waits_for_a_worker_fails_the_run_not_the_worker(
    user: Any, demo_model: Any, clock_expert: AgentDefinition, sent: list[int]
) -> None:
    run = _started(_automation(user, demo_model))
    assert run.turn_id is not None and run.status == "queued"
    clock_expert.delete()
    asyncio.run(asyncio.wait_for(run_turn(run.turn_id), 60))
    turn = Turn.objects.get(pk=run.turn_id)
    assert (turn.status, turn.error) == ("failed", AGENT_GONE_ERROR)
    run.refresh_from_db()
    assert (run.status, run.attempts, run.error) == ("failed", 1, AGENT_GONE_ERROR)  # not retried


def test_an_agent_limited_to_other_groups_while_its_run_waits_fails_the_run_saying_why(
    user: Any, demo_model: Any, clock_expert: AgentDefinition, sent: list[int]
) -> None:
    run = _started(_automation(user, demo_model))
    clock_expert.groups.add(Group.objects.create(name="Timekeepers"))
    asyncio.run(asyncio.wait_for(run_turn(run.turn_id or 0), 60))
    run.refresh_from_db()
    assert run.status == "failed" and run.attempts == 1
    assert run.error == (
        "The agent Clock expert this conversation is held as is not available to you: Not available to your groups."
    )


def test_a_retried_run_is_held_as_the_same_agent(
    user: Any, demo_model: Any, clock_expert: AgentDefinition, sent: list[int]
) -> None:
    run = _started(_automation(user, demo_model))
    first = Turn.objects.get(pk=run.turn_id or 0)
    Turn.claim(first.pk)
    Turn.objects.get(pk=first.pk).close(Turn.Status.INTERRUPTED, error="Interrupted", error_kind="interrupted")
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("queued", 2) and run.turn_id != first.pk
    retried = Turn.objects.get(pk=run.turn_id or 0)
    assert retried.chat_id == first.chat_id and retried.chat.agent == "clock_expert"
    assert retried.model == first.model


def _cookie(user: Any) -> bytes:
    client = _client(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def _list_socket(cookie: bytes, query: str = "") -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)]
    return WebsocketCommunicator(application, f"/ws/automations/{query}", headers=headers)


def test_the_list_hears_each_automations_latest_run_live(
    user: Any, other_user: Any, admin_user: Any, demo_model: Any, sent: list[int]
) -> None:
    automation = _automation(user, demo_model, agent="")
    page = _client(user).get("/automations/").content.decode()
    assert 'ws-connect="/ws/automations/"' in page
    assert f'id="auto-last-{automation.pk}"' in page and "No runs yet" in page
    assert f'id="auto-next-{automation.pk}"' in page
    everyone = _client(admin_user).get("/automations/?all=1").content.decode()
    assert 'ws-connect="/ws/automations/?all=1"' in everyone
    mine, theirs, admins = _cookie(user), _cookie(other_user), _cookie(admin_user)

    async def watch() -> tuple[list[str], list[str], bool]:
        owner, stranger, admin = _list_socket(mine), _list_socket(theirs, "?all=1"), _list_socket(admins, "?all=1")
        for socket in (owner, stranger, admin):
            assert (await socket.connect())[0]
        run = await sync_to_async(_started)(automation)
        frames = [await owner.receive_from(timeout=10)]  # queued
        await sync_to_async(Turn.claim)(run.turn_id or 0)
        frames.append(await owner.receive_from(timeout=10))  # running
        admin_frames = [await admin.receive_from(timeout=10), await admin.receive_from(timeout=10)]
        # Not an admin: asking for everyone's gives only their own (none here).
        stranger_heard = not await stranger.receive_nothing(timeout=1)
        for socket in (owner, stranger, admin):
            await socket.disconnect()
        return frames, admin_frames, stranger_heard

    frames, admin_frames, stranger_heard = asyncio.run(watch())
    badge = f'id="auto-last-{automation.pk}" hx-swap-oob="true"'
    assert all(badge in f for f in frames + admin_frames)
    assert 'data-status="queued"' in frames[0] and 'data-status="running"' in frames[1]
    assert ">Running</span>" in frames[1]
    # The row's next run comes along (a scheduled run moves it on).
    assert all(f'id="auto-next-{automation.pk}" hx-swap-oob="true"' in f for f in frames + admin_frames)
    assert not stranger_heard
