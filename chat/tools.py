"""The agent loop's toolbox for one chat: which tools are offered, and running them through the
shared executor."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from chat.agent.types import ToolCall, ToolResult
from toolsets import availability, executor
from toolsets.base import qualified_name
from toolsets.registry import all_toolsets


class ChatToolBox:
    def __init__(self, *, user_id: int, turn_id: int, selection: dict[str, list[str]]) -> None:
        self.user_id = user_id
        self.turn_id = turn_id
        self.selection = selection or {}
        self._positions: dict[str, tuple[int, int]] = {}
        self._specs: list[dict[str, Any]] = []
        # Selected toolsets that are not usable right now, as "Name (reason)".
        self.skipped: list[str] = []

    def prepare(self) -> None:
        """Decides, once per turn, which selected tools the model is offered: only those of
        toolsets usable for this user right now (blocking: call from a thread)."""
        available = availability.for_user(self.user_id)
        self._specs, self.skipped = [], []
        for toolset in all_toolsets().values():
            chosen = set(self.selection.get(toolset.id, []))
            if not chosen:
                continue
            state = available[toolset.id]
            if not state.usable:
                self.skipped.append(f"{toolset.name} ({state.reason})")
                continue
            for tool in toolset.tools:
                if tool.name in chosen:
                    self._specs.append(
                        {
                            "type": "function",
                            "function": {
                                "name": qualified_name(toolset.id, tool.name),
                                "description": tool.description,
                                "parameters": tool.parameters,
                            },
                        }
                    )

    def specs(self) -> list[dict[str, Any]]:
        return self._specs

    def place(self, call_id: str, step: int, position: int) -> None:
        self._positions[call_id] = (step, position)

    async def run(self, call: ToolCall) -> ToolResult:
        step, position = self._positions.get(call.id, (None, None))
        execution = await executor.execute(
            call.name,
            call.arguments,
            user_id=self.user_id,
            tool_call_id=call.id,
            turn_id=self.turn_id,
            step=step,
            position=position,
        )
        content = execution.model_content(settings.TESSERA["TOOL_RESULT_MODEL_LIMIT"])
        data: dict[str, Any] = {
            "arguments": execution.arguments or call.arguments,
            "duration_ms": execution.duration_ms,
        }
        if execution.error is None:
            data["result"] = execution.result
        else:
            data["error_message"] = execution.error.message + (
                "\n" + "\n".join(execution.error.details) if execution.error.details else ""
            )
            data["error_type"] = execution.error.type
        return ToolResult(call.id, content, is_error=execution.error is not None, data=data)
