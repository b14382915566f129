"""The agents: built-in ones from code (loaded once), and those an admin enabled."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from core import groups as member_groups
from core import plugins
from toolsets import availability as toolset_availability
from toolsets.registry import get_toolset

from .base import DELEGATE_PREFIX, AgentSpec

AGENT_MODULES: list[str] = [
    "chat.agents.researcher",
    "chat.agents.workspace",
    "chat.agents.general",
]


@cache
def builtin_agents() -> dict[str, AgentSpec]:
    return plugins.load(AGENT_MODULES, "agent", AgentSpec, lambda a: a.id, "agent id")


def agents() -> dict[str, AgentSpec]:
    """Every agent a chat may be offered, built-in first (blocking: reads the admin's agents,
    kept in the shared cache until one changes)."""
    from chat.models import AgentDefinition

    found = dict(builtin_agents())
    for row in AgentDefinition.enabled_rows():
        if row.slug in found:
            continue  # a built-in's name is taken; the admin form refuses it, this keeps it so
        found[row.slug] = AgentSpec(
            id=row.slug,
            name=row.name,
            description=row.description,
            instructions=row.instructions,
            toolsets=_with_knowledge(tuple(str(t) for t in row.toolsets or [] if isinstance(t, str)), row.base_ids),
            max_iterations=max(1, row.max_iterations),
            model_id=row.model_id,
            builtin=False,
            group_ids=row.group_ids,
            base_ids=row.base_ids,
        )
    return found


def name_of(agent_id: str) -> str:
    """The agent's name for a page; its id, marked gone, when no enabled agent has it now."""
    if not agent_id:
        return ""
    found = agents().get(agent_id)
    return found.name if found else f"{agent_id} (no longer available)"


def working_selection(agent: AgentSpec, general: Callable[[], dict[str, list[str]]]) -> dict[str, list[str]]:
    """The tools a conversation held *as* `agent` offers (the hub's `agent/<id>`, an automation
    with an agent): its own toolsets, every tool of each; or, for a general agent (toolsets
    None), the selection `general()` gives (read only then) without subagents (the agent itself does not delegate)."""
    from toolsets.registry import all_toolsets

    if agent.toolsets is None:
        return {k: list(v) for k, v in general().items() if k != "agents"}
    known = all_toolsets()
    return {t: [tool.name for tool in known[t].tools] for t in agent.toolsets if t in known}


def _with_knowledge(toolsets: tuple[str, ...], base_ids: tuple[int, ...]) -> tuple[str, ...]:
    # Bases attached to an agent are searched with the Knowledge tools: attaching one gives them.
    return (*toolsets, "knowledge") if base_ids and "knowledge" not in toolsets else toolsets


def agent_for_tool(name: str, known: dict[str, AgentSpec] | None = None) -> AgentSpec | None:
    if not name.startswith(DELEGATE_PREFIX):
        return None
    return (known if known is not None else agents()).get(name.removeprefix(DELEGATE_PREFIX))


@dataclass(frozen=True)
class AgentAvailability:
    agent: AgentSpec
    usable: bool
    reason: str = ""


def availability(
    user_id: int,
    known: dict[str, AgentSpec] | None = None,
    toolsets: dict[str, toolset_availability.Availability] | None = None,
    groups: frozenset[int] | None = None,
) -> dict[str, AgentAvailability]:
    """Like a toolset's: an agent limited to groups the user is not in is unusable ("Not
    available to your groups"); so is one whose toolsets are all unusable, with the reasons.
    Otherwise an agent that works with the chat's own tools, or with none, is usable."""
    groups = member_groups.of_user(user_id) if groups is None else groups
    toolsets = toolsets if toolsets is not None else toolset_availability.for_user(user_id, groups)
    result = {}
    for agent_id, agent in (known if known is not None else agents()).items():
        if not member_groups.allows(agent.group_ids, groups):
            result[agent_id] = AgentAvailability(agent, False, member_groups.NOT_IN_GROUPS)
            continue
        if not agent.toolsets:
            result[agent_id] = AgentAvailability(agent, True)
            continue
        states = [toolsets[t] for t in agent.toolsets if t in toolsets]
        if any(state.usable for state in states):
            result[agent_id] = AgentAvailability(agent, True)
            continue
        names = [f"{state.toolset.name} ({state.reason})" for state in states] or [
            _toolset_name(t) for t in agent.toolsets
        ]
        result[agent_id] = AgentAvailability(agent, False, "Needs " + " or ".join(names))
    return result


def _toolset_name(toolset_id: str) -> str:
    toolset = get_toolset(toolset_id)
    return toolset.name if toolset else toolset_id
