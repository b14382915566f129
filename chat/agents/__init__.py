"""Subagents the assistant can hand work to, through a tool named `delegate_to_<agent>`.

Built-in agents are code, one small module each, listed in `registry.AGENT_MODULES` (the same
plug-in style as toolsets); an admin adds more in Django admin (*Agents*). `registry.agents()`
gives both, `availability()` says which a user can use and why not.
"""

from .base import DELEGATE_PREFIX, AgentSpec, tool_name
from .registry import agent_for_tool, agents, availability

__all__ = ["DELEGATE_PREFIX", "AgentSpec", "agent_for_tool", "agents", "availability", "tool_name"]
