"""Fitting in the worker: a subagent fits its own context, to its model's budget; the tool
budget comes from the app settings, and a tool found in the catalogue runs through the executor.
In-process through the real loop, sink and store, with the demo model or the replay provider."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent.catalogue import FIND_TOOL
from agent.llm import LiteLLMModel
from chat.models import AppSettings, Chat, LLMModel, Message, Turn
from chat.worker.turns import run_turn
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, call, calls, finish, role
from toolsets.models import ToolExecution
from toolsets.workspace.sample_data import seed_for_user

pytestmark = pytest.mark.django_db(transaction=True)

SELECTION = {"workspace": ["list_events", "list_tasks"], "agents": ["workspace_assistant"]}


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every request the worker's models stream: its first message, size and tools."""
    seen: list[dict[str, Any]] = []
    original = LiteLLMModel.stream

    def stream(self: LiteLLMModel, messages: list[dict[str, Any]], tools: Any) -> Any:
        size = sum(self.count_message(m) for m in messages) + (self.count_tools(tools) if tools else 0)
        names = [t["function"]["name"] for t in tools or []]
        seen.append({"system": str(messages[0]["content"]), "size": size, "budget": self.budget, "tools": names})
        return original(self, messages, tools)

    monkeypatch.setattr(LiteLLMModel, "stream", stream)
    return seen


def plan_week(user: Any, model: Any) -> Turn:
    seed_for_user(user)
    chat = Chat.objects.create(owner=user, model=model, enabled_tools=SELECTION)
    turn = Turn.objects.create(chat=chat, model=model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="Plan my week from my calendar and tasks")
    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))
    turn.refresh_from_db()
    return turn


def test_a_subagent_fits_its_own_requests_to_the_models_budget(
    user: Any, demo_model: Any, requests: list[dict[str, Any]]
) -> None:
    # The subagent's second call (its instructions, the brief, both lists) is about 4 700
    # tokens whole: over this model's 3 600.
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.context_window, demo_model.answer_reserve = 4000, 400
    demo_model.save()
    turn = plan_week(user, demo_model)
    assert turn.status == "completed", turn.error
    lane = [r for r in requests if r["system"].startswith("You are the Workspace assistant")]
    assert len(lane) == 2 and all(r["budget"].input == 3600 for r in requests)
    assert all(r["size"] <= 3600 for r in requests), [r["size"] for r in requests]
    # The chat's stored transcript of the subagent is whole.
    results = Message.objects.filter(turn=turn, lane="0-0", role="tool")
    assert sum(len(m.content) for m in results) > 4000


def test_the_tool_budget_of_the_app_settings_offers_a_catalogue(
    user: Any, demo_model: Any, requests: list[dict[str, Any]]
) -> None:
    app = AppSettings.load()
    app.tool_catalogue_count = 2
    app.save()
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    plan_week(user, demo_model)
    first = requests[0]
    assert first["tools"] == [FIND_TOOL]
    assert "toolset__workspace__list_events" in first["system"] and "delegate_to_workspace_assistant" in first["system"]


def test_a_tool_found_in_the_catalogue_runs_through_the_executor_next_step(user: Any) -> None:
    replay = ReplayServer().start()
    try:
        model = LLMModel.objects.create(name="Replay", model="openai/replay", api_base=replay.base_url, api_key="sk")
        app = AppSettings.load()
        app.tool_catalogue_count = 1
        app.save()
        name = "toolset__clock_math__calculate"
        find_call = calls(call(0, id="f-1", name=FIND_TOOL, args=json.dumps({"names": [name]})))
        use_call = calls(call(0, id="c-1", name=name, args='{"expression": "6*7"}'))
        replay.play(
            Reply([role(), find_call, finish("tool_calls")]),
            Reply([role(), use_call, finish("tool_calls")]),
            answer("42."),
        )
        chat = Chat.objects.create(owner=user, model=model, enabled_tools={"clock_math": ["current_time", "calculate"]})
        turn = Turn.objects.create(chat=chat, model=model)
        Message.objects.create(chat=chat, turn=turn, role="user", content="What is 6*7?")
        asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))
        turn.refresh_from_db()
    finally:
        replay.stop()
    assert turn.status == "completed", turn.error
    offered = [[t["function"]["name"] for t in r.body.get("tools") or []] for r in replay.requests]
    assert offered == [[FIND_TOOL], [FIND_TOOL, name], [FIND_TOOL, name]]
    execution = ToolExecution.objects.get(turn=turn, tool="calculate")
    assert (execution.step, execution.status, (execution.result or {}).get("result")) == (1, "success", 42)
