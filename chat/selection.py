"""Which tools a chat may use: `{toolset_id: [tool names]}` plus `{"agents": [agent ids]}` for the
subagents it may delegate to, and the popover that edits both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from core import groups as member_groups
from toolsets import availability
from toolsets.registry import all_toolsets

from . import agents

Selection = dict[str, list[str]]
AGENTS = "agents"


def clean(selection: Any) -> Selection:
    """Only registered toolsets and tools and known agents, in registry order; anything else is
    dropped."""
    if not isinstance(selection, dict):
        return {}
    result: Selection = {}
    for toolset in all_toolsets().values():
        chosen = selection.get(toolset.id)
        if not isinstance(chosen, list):
            continue
        names = [tool.name for tool in toolset.tools if tool.name in chosen]
        if names:
            result[toolset.id] = names
    chosen_agents = selection.get(AGENTS)
    if isinstance(chosen_agents, list):
        builtin = agents.registry.builtin_agents()
        # Only an admin's agent needs a look at the database.
        every = builtin if all(a in builtin for a in chosen_agents) else agents.agents()
        known = [agent_id for agent_id in every if agent_id in chosen_agents]
        if known:
            result[AGENTS] = known
    return result


def default_selection() -> Selection:
    """A brand-new user's first chat: every tool of the toolsets that need no key, and the
    built-in agents. Not a toolset that stays off until an admin enables it (Code): ticked
    while off, it would be noted as unavailable under every answer."""
    selection = {
        ts.id: [t.name for t in ts.tools]
        for ts in all_toolsets().values()
        if not ts.needs_api_key and not ts.off_until_enabled
    }
    selection[AGENTS] = list(agents.registry.builtin_agents())
    return selection


def from_form(posted: list[str], previous: Selection, usable: set[str]) -> Selection:
    """The popover posts `toolset:tool` for each ticked box. Unusable toolsets show disabled
    boxes, which browsers do not submit, so their previous selection is kept as it was."""
    picked: dict[str, list[str]] = {}
    for item in posted:
        toolset_id, _, tool = item.partition(":")
        if toolset_id in usable or (toolset_id == AGENTS and f"{AGENTS}:{tool}" in usable):
            picked.setdefault(toolset_id, []).append(tool)
    for toolset_id, tools in previous.items():
        if toolset_id == AGENTS:
            # An agent that cannot be used right now shows a disabled box: keep its choice.
            kept = [a for a in tools if f"{AGENTS}:{a}" not in usable]
            picked.setdefault(AGENTS, []).extend(kept)
        elif toolset_id not in usable:
            picked[toolset_id] = list(tools)
    return clean(picked)


@dataclass
class ToolRow:
    name: str
    display_name: str
    description: str
    checked: bool
    usable: bool = True
    reason: str = ""


@dataclass
class ToolsetRow:
    id: str
    name: str
    description: str
    usable: bool
    reason: str
    settings_url: str
    tools: list[ToolRow]

    @property
    def enabled_count(self) -> int:
        return sum(tool.checked and tool.usable for tool in self.tools)

    @property
    def state(self) -> str:
        """all | none | some — the tri-state of the toolset's checkbox, over the tools that can be
        ticked (an agent that cannot be used has a disabled box the row's box cannot change)."""
        count = self.enabled_count
        total = sum(tool.usable for tool in self.tools)
        return "all" if count == total else "none" if count == 0 else "some"


def popover_rows(user_id: int, selection: Selection, groups: frozenset[int] | None = None) -> list[ToolsetRow]:
    rows = []
    if groups is None:
        groups = member_groups.of_user(user_id)  # read once, for the toolsets and the agents
    states = availability.for_user(user_id, groups)
    for toolset_id, state in states.items():
        chosen = set(selection.get(toolset_id, []))
        toolset = state.toolset
        rows.append(
            ToolsetRow(
                id=toolset_id,
                name=toolset.name,
                description=toolset.description,
                usable=state.usable,
                reason=state.reason,
                settings_url=state.settings_url,
                tools=[
                    ToolRow(t.name, t.display_name, t.description, t.name in chosen)
                    for t in toolset.tools
                    if t.model_visible  # an MCP App's own tools are its View's, not a choice
                ],
            )
        )
    agent_states = agents.availability(user_id, toolsets=states, groups=groups)
    if agent_states:
        chosen = set(selection.get(AGENTS, []))
        rows.append(
            ToolsetRow(
                id=AGENTS,
                name="Agents",
                description="Subagents the assistant can hand a piece of work to.",
                usable=any(state.usable for state in agent_states.values()),
                reason="" if any(s.usable for s in agent_states.values()) else "No agent can be used right now",
                settings_url=reverse("toolsets:settings"),
                tools=[
                    ToolRow(
                        agent_id,
                        state.agent.name,
                        state.agent.description if state.usable else state.reason,
                        agent_id in chosen,
                        usable=state.usable,
                        reason=state.reason,
                    )
                    for agent_id, state in agent_states.items()
                ],
            )
        )
    return rows


def usable_keys(rows: list[ToolsetRow]) -> set[str]:
    """What the popover's form may change: usable toolsets by id, usable agents as agents:<id>."""
    keys = {row.id for row in rows if row.usable and row.id != AGENTS}
    for row in rows:
        if row.id == AGENTS:
            keys |= {f"{AGENTS}:{tool.name}" for tool in row.tools if tool.usable}
    return keys


def badge_count(rows: list[ToolsetRow]) -> int:
    """Tools the model will actually be offered: ticked, in usable toolsets."""
    return sum(row.enabled_count for row in rows if row.usable)
