"""What the loop needs from its host: a model to stream from, a toolbox to run calls and a sink
that hears every event (persistence and pushing to the browser live there). Protocols only, so
the loop stays plain Python and any host (the worker, tests, a benchmark) can supply them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from .types import AssistantMessage, StreamEvent, ToolCall, ToolResult

__all__ = ["EventSink", "Model", "ToolBox"]


class Model(Protocol):
    @property
    def partial(self) -> AssistantMessage:
        """What the current stream has delivered so far."""

    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> AsyncIterator[StreamEvent]: ...


class ToolBox(Protocol):
    def specs(self) -> list[dict[str, Any]]:
        """OpenAI-format tool definitions offered to the model this turn."""
        ...

    async def run(self, call: ToolCall, step: int, position: int) -> ToolResult:
        """Runs one call, the `position`-th of model call `step`: that place, not the provider's
        id, is what names it. Failures come back as results with is_error, never as exceptions."""
        ...


class EventSink(Protocol):
    """What the host hears about, in order. Persistence and pushing to the browser live here."""

    async def step_started(self, step: int) -> None: ...
    async def text(self, step: int, delta: str) -> None: ...
    async def tool_call_opened(self, step: int, position: int, call_id: str, name: str) -> None: ...
    async def tool_arguments(self, step: int, position: int, text: str) -> None:
        """A call's arguments so far, while the model writes them (incomplete JSON)."""

    async def assistant_message(self, step: int, message: AssistantMessage, status: str) -> None: ...
    async def tools_started(self, step: int, calls: list[ToolCall]) -> None: ...
    async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult) -> None: ...
    async def system_message(self, step: int, content: str) -> None: ...
    async def notice(self, kind: str, text: str) -> None: ...
    async def steered(self, step: int, texts: list[str]) -> None: ...
