"""What a program asked a turn for (the hub: `/v1`, `/mcp`'s agents), as the turn runner reads
it: the caller's own conversation, instructions and tools, the agent it named, and who called.

Stored as JSON in `Turn.api` (the same keys as ever, so turns already in the database load);
a turn typed in the chat stores `{}` and has no request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chat.models import Turn


@dataclass(frozen=True)
class TurnRequest:
    # The caller's conversation in OpenAI's message shape: the turn runs with it, not the
    # chat's transcript. None: the chat's own (an empty list is still the caller's).
    messages: list[dict[str, Any]] | None = None
    system: str = ""  # the caller's instructions, after Tessera's
    # Tools the caller runs itself (OpenAI `tools`): offered to the model, their calls handed back.
    tools: list[dict[str, Any]] = field(default_factory=list)
    agent: str = ""  # the agent the caller named (its id), or "" for a model
    client: str = ""  # how the caller is named in audit ("openai: token ci", "mcp: Zed")
    principal: str = ""  # the caller's fair-share key (hub/caller.py)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "system": self.system,
            "tools": self.tools,
            "agent": self.agent,
            "client": self.client[:200],
            "principal": self.principal[:200],
        }
        if self.messages is not None:
            data["messages"] = self.messages
        return data

    @classmethod
    def from_json(cls, data: Any) -> TurnRequest | None:
        """The request a turn stored, or None for the chat's own turn. Lenient about what older
        rows may lack or hold (a missing key, a null): each falls back to its default."""
        if not isinstance(data, dict) or not data:
            return None
        messages = data.get("messages") if "messages" in data else None
        tools = data.get("tools")
        return cls(
            messages=[m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else None,
            system=str(data.get("system") or ""),
            tools=[t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else [],
            agent=str(data.get("agent") or ""),
            client=str(data.get("client") or ""),
            principal=str(data.get("principal") or ""),
        )

    @classmethod
    def of(cls, turn: Turn) -> TurnRequest | None:
        return cls.from_json(turn.api)

    @property
    def tool_names(self) -> set[str]:
        """The names of the caller's own tools: the calls of these go back to the caller."""
        return {str((t.get("function") or {}).get("name") or "") for t in self.tools} - {""}
