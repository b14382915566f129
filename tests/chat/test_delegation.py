"""Delegation to subagents, run in-process through the real loop, sink, store and demo model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import Client

from chat.models import Chat, Message, Turn
from chat.presenters import turn_views
from chat.worker.turns import run_turn
from toolsets.models import ToolExecution
from toolsets.workspace.sample_data import seed_for_user

pytestmark = pytest.mark.django_db(transaction=True)

SELECTION = {
    "clock_math": ["current_time", "calculate"],
    "workspace": ["list_events", "list_tasks"],
    "agents": ["researcher", "workspace_assistant", "general"],
}


def ask(user: Any, model: Any, text: str, selection: dict[str, list[str]] | None = None) -> Turn:
    model.extra_params = {"tokens_per_second": 0}
    model.save()
    chat = Chat.objects.create(owner=user, model=model, enabled_tools=selection or SELECTION)
    turn = Turn.objects.create(chat=chat, model=model)
    Message.objects.create(chat=chat, turn=turn, role="user", content=text)
    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))
    turn.refresh_from_db()
    return turn


def test_week_plan_is_delegated_and_the_subagents_work_is_stored_in_its_lane(user: Any, demo_model: Any) -> None:
    seed_for_user(user)
    turn = ask(user, demo_model, "Plan my week from my calendar and tasks")

    assert turn.status == "completed", turn.error
    delegation = ToolExecution.objects.get(turn=turn, toolset="agents")
    assert (delegation.tool, delegation.lane, delegation.step, delegation.position, delegation.status) == (
        "workspace_assistant",
        "",
        0,
        0,
        "success",
    )
    assert (delegation.result or {})["delegation"]["state"] == "done"
    # The subagent's own calls ran at places inside the delegation's lane.
    nested = ToolExecution.objects.filter(turn=turn, lane="0-0").order_by("position")
    assert [(e.tool, e.status) for e in nested] == [("list_events", "success"), ("list_tasks", "success")]
    # Its transcript is stored in its lane and never reaches the supervisor's transcript.
    lane_roles = list(Message.objects.filter(turn=turn, lane="0-0").order_by("id").values_list("role", flat=True))
    assert lane_roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    supervisor = list(Message.objects.filter(turn=turn, lane="").order_by("id"))
    assert [m.role for m in supervisor] == ["user", "assistant", "tool", "assistant"]
    report = Message.objects.filter(turn=turn, lane="0-0", role="assistant").last()
    assert report is not None and "plan for your week" in report.content
    assert supervisor[2].content == report.content  # the subagent's answer is the tool result
    assert "Workspace assistant" in supervisor[3].content
    # The subagent's tokens count in the turn's.
    lane_tokens = sum(m.completion_tokens or 0 for m in Message.objects.filter(turn=turn, lane="0-0", role="assistant"))
    assert turn.usage["completion_tokens"] >= lane_tokens > 0


def test_reload_shows_the_delegation_card_with_nested_cards(user: Any, demo_model: Any) -> None:
    seed_for_user(user)
    turn = ask(user, demo_model, "Plan my week from my calendar and tasks")

    view = turn_views([turn])[0][turn.pk]
    (card,) = view["steps"][0]["cards"]
    assert card["display_name"] == "Workspace assistant" and card["status"] == "success"
    delegation = card["delegation"]
    assert delegation["state"] == "done" and delegation["task"].startswith("Plan my week")
    nested = [c for s in delegation["steps"] for c in s["cards"]]
    assert [c["name"] for c in nested] == ["toolset__workspace__list_events", "toolset__workspace__list_tasks"]
    assert all(c["status"] == "success" for c in nested)
    assert nested[0]["dom_id"] == f"card-{turn.pk}-0-0-0-0"
    client = Client()
    client.force_login(user)
    page = client.get(f"/chats/{turn.chat_id}/").content.decode()
    assert 'data-testid="delegation"' in page and f'id="steps-{turn.pk}-0-0"' in page


def test_two_requests_become_two_parallel_delegations(user: Any, demo_model: Any) -> None:
    seed_for_user(user)
    turn = ask(user, demo_model, "Research Django Channels in depth and plan my week from my calendar and tasks")

    assert turn.status == "completed", turn.error
    tools = list(
        ToolExecution.objects.filter(turn=turn, toolset="agents").order_by("position").values_list("tool", "lane")
    )
    assert tools == [("researcher", ""), ("workspace_assistant", "")]
    # Without an Exa key the Researcher has only Web fetch, and says it could not search.
    researcher = ToolExecution.objects.get(turn=turn, tool="researcher")
    assert researcher.status == "success"


def test_a_subagent_cannot_delegate_further(user: Any, demo_model: Any) -> None:
    seed_for_user(user)
    turn = ask(user, demo_model, "Plan my week from my calendar and tasks")
    sub = Message.objects.filter(turn=turn, lane="0-0", role="assistant").first()
    assert sub is not None
    offered = json.dumps(sub.tool_calls)
    assert "delegate_to_" not in offered


def test_bad_delegation_arguments_are_a_validation_error_the_model_sees(user: Any, demo_model: Any) -> None:
    from agent.types import ToolCall
    from chat.worker.delegation import _arguments

    for raw in [
        "{}",
        '{"task": ""}',
        '{"task": 3}',
        '{"task": "x", "context": []}',
        '{"task": "x", "evil": 1}',
        "[",
        '"x"',
    ]:
        task, _context, problem = _arguments(ToolCall("c1", "delegate_to_general", raw))
        assert problem and not task, raw
    assert _arguments(ToolCall("c1", "delegate_to_general", '{"task": " Do it ", "context": "ctx"}')) == (
        "Do it",
        "ctx",
        "",
    )


def test_admin_agent_is_offered_and_checked(user: Any, demo_model: Any) -> None:
    from chat.admin import AgentDefinitionForm
    from chat.agents import agents, availability

    fields = {"name": "X", "description": "d", "instructions": "i", "max_iterations": 3, "enabled": True}
    bad = AgentDefinitionForm(data={**fields, "slug": "researcher", "toolsets": '["nope"]'})
    assert not bad.is_valid() and {"slug", "toolsets"} <= set(bad.errors)
    form = AgentDefinitionForm(
        data={**fields, "name": "Clock expert", "slug": "clock_expert", "toolsets": '["clock_math"]'}
    )
    assert form.is_valid(), form.errors
    form.save()
    known = agents()
    assert known["clock_expert"].toolsets == ("clock_math",) and not known["clock_expert"].builtin
    assert availability(user.pk)["clock_expert"].usable
    # An agent whose every toolset is unusable is unusable, with the reason.
    from toolsets.models import ToolsetConfig

    ToolsetConfig.objects.update_or_create(toolset_id="clock_math", defaults={"enabled": False})
    state = availability(user.pk)["clock_expert"]
    assert not state.usable and "Clock & math (Disabled by administrator)" in state.reason


def test_research_is_delegated_and_cited_with_stable_numbers(user: Any, demo_model: Any) -> None:
    from toolsets.exa.fake_server import FAKE_API_KEY, FakeExa
    from toolsets.models import ToolsetConfig, UserToolsetConfig

    with FakeExa() as exa:
        ToolsetConfig.objects.update_or_create(toolset_id="exa", defaults={"settings": {"base_url": exa.base_url}})
        UserToolsetConfig.objects.create(user=user, toolset_id="exa", api_key=FAKE_API_KEY)
        turn = ask(user, demo_model, "Research Django Channels in depth", {"agents": ["researcher"]})

    assert turn.status == "completed", turn.error
    search = ToolExecution.objects.get(turn=turn, lane="0-0", tool="search")
    assert search.sources and [s["n"] for s in search.sources] == list(range(1, len(search.sources) + 1))
    report = Message.objects.filter(turn=turn, lane="0-0", role="assistant").last()
    assert report is not None and "[1]" in report.content
    view = turn_views([turn])[0][turn.pk]
    assert [s["n"] for s in view["sources"]] == [s["n"] for s in search.sources]
    (card,) = view["steps"][0]["cards"]
    assert f'href="#src-{turn.pk}-1"' in card["delegation"]["result_html"]
    client = Client()
    client.force_login(user)
    page = client.get(f"/chats/{turn.chat_id}/").content.decode()
    assert f'id="src-{turn.pk}-1"' in page and 'class="cite"' in page


def test_a_subagent_is_offered_the_owners_memories_and_never_anothers(
    user: Any, other_user: Any, demo_model: Any
) -> None:
    from memory.models import Memory

    seed_for_user(user)
    Memory.objects.create(owner=user, text="Prefers answers in German")
    Memory.objects.create(owner=other_user, text="Works nights in Lisbon")
    turn = ask(user, demo_model, "Plan my week from my calendar and tasks")

    assert turn.status == "completed", turn.error
    instructions = Message.objects.get(turn=turn, lane="0-0", role="system").content
    assert '<memory id="' in instructions and "Prefers answers in German" in instructions
    assert "Lisbon" not in instructions
