"""An MCP server's question during a tool call (elicitation), asked on the call's card.

The MCP client (`toolsets.mcp.elicitation`) calls an `Elicitor` with the question; the card of
that call shows it (part of the turn's live state, so a reload or a reconnect shows it again),
and the wait is `toolsets.mcp.elicitation.wait` on the worker's event loop, like an approval's.
Any tab of the chat's owner answers through `chat.elicitation_views.answer_elicitation`; Stop
cancels the wait like any running tool.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from toolsets.mcp import elicitation
from toolsets.mcp.elicitation import Answer, ElicitationRequest

if TYPE_CHECKING:
    from .streaming import TurnSink


class Elicitor:
    """One turn's (or one subagent lane's) way of asking; `ChatToolBox` binds it per call."""

    def __init__(self, sink: TurnSink, lane: str = "") -> None:
        self.sink, self.lane = sink, lane

    async def __call__(self, step: int, position: int, request: ElicitationRequest) -> Answer:
        sink = self.sink
        await elicitation.open_request(
            sink.redis, request, chat_id=sink.chat_id, turn_id=sink.turn_id, user_id=sink.turn.chat.owner_id
        )
        try:
            await sink.elicitation_needed(step, position, request, self.lane)
            answer = await elicitation.wait(sink.redis, request)
        finally:
            # Also after Stop: an answer arriving later finds nothing to answer.
            await asyncio.shield(elicitation.close(sink.redis, request))
        await sink.elicitation_answered(step, position, self.lane)
        return answer
