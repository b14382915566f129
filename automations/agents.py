"""Which agents an automation may run as: those the owner may use (the same availability the
chat's tools popover and the hub's `agent/<id>` apply: groups, and a usable toolset), less
those the admin's limits keep out. One check for the form (when it is saved) and the run (when
it starts: the agent may have been deleted, turned off or limited since)."""

from __future__ import annotations

from chat.agents import AgentSpec, agents, availability
from chat.agents.registry import name_of

__all__ = ["choices", "name_of", "own_toolsets", "resolve"]

from .models import AutomationLimits


def choices(user_id: int, limits: AutomationLimits) -> list[tuple[str, str]]:
    """(id, name) of each agent the owner may choose now."""
    return [
        (agent_id, state.agent.name)
        for agent_id, state in availability(user_id).items()
        if state.usable and (not limits.allowed_agents or agent_id in limits.allowed_agents)
    ]


def resolve(user_id: int, agent_id: str, limits: AutomationLimits | None = None) -> tuple[AgentSpec | None, str]:
    """The agent, or None and why the owner may not run as it (a sentence for the form and the
    run's failure)."""
    limits = limits or AutomationLimits.load()
    state = availability(user_id).get(agent_id)
    if state is None:
        return None, f"The agent “{agent_id}” no longer exists (an administrator deleted or turned it off)."
    name = state.agent.name
    if limits.allowed_agents and agent_id not in limits.allowed_agents:
        return None, f"An administrator does not allow automations to run as the agent “{name}”."
    if not state.usable:
        return None, f"The agent “{name}” is not available to you: {state.reason}."
    return state.agent, ""


def own_toolsets(agent_id: str) -> list[str] | None:
    """The names of the toolsets the agent works with, when it has its own (then the
    automation's tool choice does not apply); None for no agent or a general one."""
    from toolsets.registry import get_toolset

    found = agents().get(agent_id) if agent_id else None
    if found is None or found.toolsets is None:
        return None
    return [toolset.name if (toolset := get_toolset(t)) else t for t in found.toolsets]
