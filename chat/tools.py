"""The agent loop's toolbox for one chat: which tools are offered, and running them through the
shared executor."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from chat.agent.types import ToolCall, ToolResult
from toolsets import availability, executor
from toolsets.base import qualified_name
from toolsets.registry import all_toolsets

# ToolExecution.tool_call_id's length. Ids can be longer (Gemini's carry a signature); the
# record only needs one to show, the transcript keeps the whole id.
TOOL_CALL_ID_LENGTH = 200


ProgressCallback = Callable[[int, int, str, float | None], Awaitable[None]]


class ChatToolBox:
    def __init__(
        self,
        *,
        user_id: int,
        turn_id: int,
        selection: dict[str, list[str]],
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self.user_id = user_id
        self.turn_id = turn_id
        self.selection = selection or {}
        self._specs: list[dict[str, Any]] = []
        # Where a tool's progress reports go: (step, position, text, percent).
        self.on_progress = on_progress
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

    def _progress_reporter(self, step: int, position: int) -> Callable[[str, float | None], None]:
        loop = asyncio.get_running_loop()

        def report(text: str, percent: float | None = None) -> None:
            # Sync tools run in a worker thread: hop back onto the turn's event loop.
            if self.on_progress is None:
                return
            callback = self.on_progress
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(callback(step, position, text, percent)))

        return report

    async def run(self, call: ToolCall, step: int, position: int) -> ToolResult:
        # The execution is recorded at its place in the turn, which is how its card finds it
        # again after a reload; the provider's id may be shared by several calls.
        execution = await executor.execute(
            call.name,
            call.arguments,  # as the model sent it: the executor reports what is wrong with it
            user_id=self.user_id,
            tool_call_id=call.id[:TOOL_CALL_ID_LENGTH],
            turn_id=self.turn_id,
            step=step,
            position=position,
            progress=self._progress_reporter(step, position),
        )
        content = execution.model_content(int(settings.TESSERA["TOOL_RESULT_MODEL_LIMIT"]))
        data: dict[str, Any] = {
            "arguments": execution.arguments or call.arguments,
            "duration_ms": execution.duration_ms,
            "execution_id": execution.record_id,
        }
        if execution.error is None:
            data["result"] = execution.result
        else:
            data["error_message"] = execution.error.full_message
            data["error_type"] = execution.error.type
        return ToolResult(call.id, content, is_error=execution.error is not None, data=data)
