"""What an agent is: a name, instructions, the toolsets it may use and its limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DELEGATE_PREFIX = "delegate_to_"
# What the supervisor passes: the same two parameters for every agent.
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What the agent should do, as a complete instruction."},
        "context": {"type": "string", "description": "What it needs to know from the conversation so far."},
    },
    "required": ["task"],
    "additionalProperties": False,
}
MAX_TASK_LENGTH = 8_000
MAX_CONTEXT_LENGTH = 16_000


@dataclass(frozen=True)
class AgentSpec:
    id: str  # the tool is delegate_to_<id>
    name: str
    description: str
    instructions: str
    # Toolset ids it may use. None: the tools the chat has selected (a general helper).
    toolsets: tuple[str, ...] | None = ()
    max_iterations: int = 5
    model_id: int | None = None  # an admin's choice of model; None: the chat's
    builtin: bool = True
    start_message: str = field(default="")
    # The groups an admin limited it to (empty: everyone).
    group_ids: frozenset[int] = frozenset()
    # The knowledge bases an admin attached: its Knowledge searches look only there (and only
    # in those the user it works for may see, checked on every call).
    base_ids: tuple[int, ...] = ()

    @property
    def scope(self) -> dict[str, Any]:
        """What its tool calls are limited to (ToolContext.scope)."""
        return {"knowledge_bases": list(self.base_ids)} if self.base_ids else {}

    @property
    def tool_name(self) -> str:
        return tool_name(self.id)

    @property
    def working_text(self) -> str:
        return self.start_message or f"{self.name} is working on it…"

    def spec(self) -> dict[str, Any]:
        """The OpenAI-format tool the supervisor is offered."""
        return {
            "type": "function",
            "function": {
                "name": self.tool_name,
                "description": f"Delegate a task to the {self.name} agent: {self.description}",
                "parameters": PARAMETERS,
            },
        }


def tool_name(agent_id: str) -> str:
    return DELEGATE_PREFIX + agent_id
