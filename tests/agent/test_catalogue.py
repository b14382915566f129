"""Many tools, small prompts (agent/catalogue.py and the loop's use of it): past the tool
budget the model gets a catalogue and find_tools; what it finds is offered from its next step."""

from __future__ import annotations

import json
from typing import Any

from agent.catalogue import FIND_TOOL, ToolBudget, catalogue, find, group_of
from agent.llm import LiteLLMModel, ModelConfig
from agent.loop import Agent, CancelToken

from .helpers import RecordingSink, Script, Tools, call_chunk, finish, text_chunk

SYSTEM = {"role": "system", "content": "You are helpful."}
ASK = [SYSTEM, {"role": "user", "content": "Add 2 and 3."}]


class ManyTools(Tools):
    """`count` tools with descriptions, each answering with its own name."""

    def __init__(self, count: int) -> None:
        async def answer(name: str = "", **_: Any) -> str:
            return name

        super().__init__(**{f"tool_{i}": answer for i in range(count)})

    def specs(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"Does task number {name[5:]}. More words that the catalogue leaves out.",
                    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
            }
            for name in self.funcs
        ]


def agent_for(script: Script, tools: Tools, budget: ToolBudget | None = None) -> tuple[Agent, RecordingSink]:
    sink = RecordingSink()
    model = LiteLLMModel(ModelConfig(model="scripted/test", retries=0, backoff_s=0), completion=script)
    return Agent(
        model, tools, sink, CancelToken(), fitter=model.fitter(), tool_budget=budget or ToolBudget(30, 6000)
    ), sink


def names(call: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in call.get("tools") or []]


async def test_two_hundred_tools_send_a_catalogue_and_a_found_tool_is_called_next_step() -> None:
    script = Script(
        [call_chunk(0, id="f", name=FIND_TOOL, args='{"names": ["tool_150"]}'), finish("tool_calls")],
        [call_chunk(0, id="t", name="tool_150", args='{"name": "tool_150"}'), finish("tool_calls")],
        [text_chunk("5."), finish()],
    )
    tools = ManyTools(200)
    agent, _ = agent_for(script, tools)
    outcome = await agent.run(ASK)
    assert outcome.status == "completed"
    first, second, third = script.calls
    # The first request: the catalogue in the system prompt, one definition (find_tools).
    assert names(first) == [FIND_TOOL]
    system = first["messages"][0]["content"]
    assert system.startswith("You are helpful.") and "- tool_199: Does task number 199." in system
    assert "More words" not in system
    # Found: offered from the next step on, and for the rest of the turn.
    assert names(second) == [FIND_TOOL, "tool_150"]
    assert names(third) == [FIND_TOOL, "tool_150"]
    assert ("tool_150", 1, 0) in tools.places
    assert json.loads(second["messages"][-1]["content"].split("\n", 1)[1])[0]["name"] == "tool_150"
    # The same prefix on every call: the catalogue does not move or change.
    assert first["messages"][0] == second["messages"][0] == third["messages"][0]
    # The transcript itself has no catalogue.
    assert agent.messages[0] == SYSTEM
    # Even these small definitions cost more than twice what their catalogue does.
    full = LiteLLMModel(ModelConfig(model="scripted/test"), completion=script).count_tools(tools.specs())
    assert full > 2 * agent.fitter.count({"role": "system", "content": system})  # type: ignore[union-attr]


async def test_a_small_selection_is_offered_as_today() -> None:
    script = Script([text_chunk("Hi."), finish()])
    tools = ManyTools(5)
    agent, _ = agent_for(script, tools)
    await agent.run(ASK)
    assert script.calls[0]["tools"] == tools.specs()
    assert script.calls[0]["messages"] == ASK


async def test_the_token_budget_alone_can_call_for_the_catalogue() -> None:
    script = Script([text_chunk("Hi."), finish()])
    agent, _ = agent_for(script, ManyTools(12), ToolBudget(count=0, tokens=200))
    await agent.run(ASK)
    assert names(script.calls[0]) == [FIND_TOOL]


def test_find_by_query_and_unknown_names() -> None:
    specs = ManyTools(30).specs()
    found, text = find(specs, {"query": "task number 2", "names": ["nope"]})
    assert found[0] == "tool_2" and len(found) <= 10
    assert "Unknown: nope." in text
    assert find(specs, {"names": ["nope"]})[0] == []


def test_catalogue_groups_by_toolset() -> None:
    specs = [
        {"type": "function", "function": {"name": "toolset__web__search", "description": "Search the web."}},
        {"type": "function", "function": {"name": "delegate_to_researcher", "description": "Research."}},
        {"type": "function", "function": {"name": "toolset__clock_math__now", "description": "Time."}},
    ]
    text = catalogue(specs)
    assert text.index("[agents]") < text.index("[clock_math]") < text.index("[web]")
    assert group_of("toolset__clock_math__now") == "clock_math"
