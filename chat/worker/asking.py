"""Asking the chat's owner during a tool call, on the call's card: one flow for every kind of
question (`core.questions`).

The executor asks before an "ask" tool runs (`approve`: an approval), an MCP server asks during
a call (`elicit`: its form, or a page to open). Either way the question is opened in the one
store, the card of that call shows it (`TurnSink.question_needed`: part of the turn's live
state, so a reload or a reconnect shows it again), and the wait is `core.questions.wait` on the
worker's event loop. Any tab of the owner answers through `chat.question_views.answer`; Stop
cancels the wait like any running tool, and the question is withdrawn either way.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from core import questions
from toolsets.mcp import elicitation
from toolsets.mcp.elicitation import Answer, ElicitationRequest
from toolsets.policy import approval
from toolsets.policy.approval import ApprovalRequest, Decision

from .. import presenters, signals
from .loop import db

if TYPE_CHECKING:
    from .streaming import TurnSink


class Asking:
    """One turn's (or one subagent lane's) way of asking; `ChatToolBox` binds it per call:
    `approve` and `elicit` take (step, position, request)."""

    def __init__(self, sink: TurnSink, lane: str = "") -> None:
        self.sink, self.lane = sink, lane

    async def _ask(self, step: int, position: int, question: questions.Question, card: Any) -> dict[str, Any] | None:
        """Opens `question`, shows it on the card (`card()` draws it once it is open) and waits:
        the answer, or None when nobody answered in time."""
        sink = self.sink
        await questions.ask(sink.redis, question)
        # `automated`: whether the chat is a run (its receivers skip the others without a query).
        told = dict(turn_id=sink.turn_id, chat_id=sink.chat_id, question_id=question.id, automated=sink.automated)
        try:
            await sink.question_needed(step, position, card(question.deadline), self.lane)
            # Who waits on the owner (an automation's run) is told; its receivers use the database.
            what = str(question.payload.get("display_name") or question.payload.get("tool") or question.kind)
            await db(signals.question_opened.send_robust)(Asking, title=what, **told)
            return await questions.wait(sink.redis, question)
        finally:
            # Also after Stop: an answer arriving later finds nothing to answer.
            await asyncio.shield(questions.close(sink.redis, question.id))
            await asyncio.shield(db(signals.question_closed.send_robust)(Asking, **told))

    async def approve(self, step: int, position: int, request: ApprovalRequest) -> Decision:
        """Before an "ask" call runs. Approved: the card runs again; denied: its error card follows."""

        def card(deadline: float) -> dict[str, Any]:
            request.deadline = deadline
            return presenters.approval(request)

        sink = self.sink
        asked = approval.question(request, chat_id=sink.chat_id, turn_id=sink.turn_id, user_id=sink.turn.chat.owner_id)
        decision = approval.decision(await self._ask(step, position, asked, card))
        if decision.approved:
            await self.sink.question_answered(step, position, self.lane)
        return decision

    async def elicit(self, step: int, position: int, request: ElicitationRequest) -> Answer:
        """A running MCP tool's server asks; answered (or given up), the call runs on."""

        def card(deadline: float) -> dict[str, Any]:
            request.deadline = deadline
            return presenters.elicitation(request)

        sink = self.sink
        asked = elicitation.question(
            request, chat_id=sink.chat_id, turn_id=sink.turn_id, user_id=sink.turn.chat.owner_id
        )
        answer = elicitation.outcome(await self._ask(step, position, asked, card))
        await self.sink.question_answered(step, position, self.lane)
        return answer
