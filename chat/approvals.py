"""Asking the chat's owner before an "ask" tool runs: the approval card, and the wait.

The executor calls an `Asker` with the request; the card of that call turns into an approval
card (part of the turn's live state, so a reload or a reconnect shows it again), and the wait
is `toolsets.policy.approval.wait` on the worker's event loop. Any tab of the owner answers
through `chat.approval_views.answer_approval`. Stop cancels the wait like any running tool.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from toolsets.policy import approval
from toolsets.policy.approval import ApprovalRequest, Decision

if TYPE_CHECKING:
    from .streaming import TurnSink


class Asker:
    """One turn's (or one subagent lane's) way of asking; `ChatToolBox` calls it per call."""

    def __init__(self, sink: TurnSink, lane: str = "") -> None:
        self.sink, self.lane = sink, lane
        self.chat_id: int = sink.chat_id

    async def __call__(self, step: int, position: int, request: ApprovalRequest) -> Decision:
        sink = self.sink
        await approval.open_request(
            sink.redis, request, chat_id=sink.chat_id, turn_id=sink.turn_id, user_id=sink.turn.chat.owner_id
        )
        try:
            await sink.approval_needed(step, position, request, self.lane)
            decision = await approval.wait(sink.redis, request)
        finally:
            # Also after Stop: an answer arriving later finds nothing to answer.
            await asyncio.shield(approval.close(sink.redis, request.id))
        await sink.approval_answered(step, position, decision, self.lane)
        return decision
