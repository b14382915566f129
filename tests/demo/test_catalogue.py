"""The demo model past the tool budget (demo/catalogue.py): offered only find_tools and a
catalogue in the system prompt, it looks up the tool it needs, calls it from its next step and
answers from the result, as a real model does; through the planner, then through a real turn
with every built-in tool selected."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent.catalogue import FIND_SPEC, FIND_TOOL, catalogue, find

from .helpers import ALL_TOOLS, WORKSPACE_TOOLS, stream, tool_result

MANY = [*ALL_TOOLS, *WORKSPACE_TOOLS] + [
    tool
    for n in range(12)  # a dozen MCP servers, a few tools each
    for tool in (
        {"type": "function", "function": {"name": f"toolset__mcp_server{n}__{name}", "description": f"{name} {n}"}}
        for name in ("search", "read", "write")
    )
]
QUESTION = "What is 12 * 34?"


def _catalogued(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are Tessera.\n\n" + catalogue(MANY)},
        {"role": "user", "content": text},
    ]


def test_a_tool_only_in_the_catalogue_is_looked_up_then_called_then_used() -> None:
    messages = _catalogued(QUESTION)
    first = stream(messages, [FIND_SPEC])
    assert first.text == "" and [c["name"] for c in first.tool_calls()] == [FIND_TOOL]
    lookup = first.tool_calls()[0]
    assert lookup["arguments"] == {"names": ["toolset__clock_math__calculate"]}

    # The loop answers the lookup and offers the found definition from the next step.
    found, text = find(MANY, lookup["arguments"])
    messages += [first.assistant_message(), tool_result(lookup, text)]
    offered = [FIND_SPEC, *(spec for spec in MANY if spec["function"]["name"] in found)]
    second = stream(messages, offered)
    assert [(c["name"], c["arguments"]) for c in second.tool_calls()] == [
        ("toolset__clock_math__calculate", {"expression": "12*34"})
    ]

    messages += [second.assistant_message(), tool_result(second.tool_calls()[0], {"result": 408})]
    answer = stream(messages, offered)
    assert "408" in answer.text and "enable" not in answer.text.lower()


def test_it_looks_up_once_and_says_so_when_nothing_serves_the_request() -> None:
    # Neither offered nor catalogued: no lookup, the usual "not enabled" answer.
    messages = [
        {"role": "system", "content": "You are Tessera.\n\n" + catalogue(WORKSPACE_TOOLS)},
        {"role": "user", "content": QUESTION},
    ]
    plain = stream(messages, [FIND_SPEC])
    assert not plain.tool_calls() and "isn't enabled" in plain.text
    # Looked up but not found (the lookup answered "No tool matched"): no second lookup.
    messages = _catalogued(QUESTION)
    first = stream(messages, [FIND_SPEC])
    messages += [first.assistant_message(), tool_result(first.tool_calls()[0], "No tool matched.")]
    after = stream(messages, [FIND_SPEC])
    assert not after.tool_calls() and "isn't enabled" in after.text
    # Without find_tools on offer, a catalogue alone changes nothing.
    assert "isn't enabled" in stream(_catalogued(QUESTION), []).text


@pytest.mark.django_db(transaction=True)
def test_a_real_turn_with_more_tools_selected_than_the_budget_finds_and_calls_its_tool(
    user: Any, demo_model: Any
) -> None:
    from chat.models import AppSettings, Chat, Message, Turn
    from chat.worker.turns import run_turn
    from toolsets.models import ToolExecution
    from toolsets.registry import builtin_toolsets
    from toolsets.workspace.sample_data import seed_for_user

    seed_for_user(user)  # the workspace's eleven tools are offered only with its data

    app = AppSettings.load()
    app.tool_catalogue_count = 10
    app.save()
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    selection = {name: [tool.name for tool in toolset.tools] for name, toolset in builtin_toolsets().items()}
    assert sum(map(len, selection.values())) > app.tool_catalogue_count
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools=selection, title="Many tools")
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role="user", content=QUESTION)

    asyncio.run(asyncio.wait_for(run_turn(turn.pk), 60))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED, turn.error
    steps = list(Message.objects.filter(turn=turn, role="assistant").order_by("id"))
    called = [[c["function"]["name"] for c in m.tool_calls or []] for m in steps]
    assert called == [[FIND_TOOL], ["toolset__clock_math__calculate"], []], called
    lookup = (steps[0].tool_calls or [{}])[0]
    assert json.loads(lookup["function"]["arguments"]) == {"names": ["toolset__clock_math__calculate"]}
    assert ToolExecution.objects.get(turn=turn).tool == "calculate"
    offered = json.loads(Message.objects.get(turn=turn, role="tool", step=0).content.split("\n", 1)[1])
    assert [spec["name"] for spec in offered] == ["toolset__clock_math__calculate"]
    assert "408" in steps[-1].content and "enable" not in steps[-1].content.lower()
