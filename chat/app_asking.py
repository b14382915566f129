"""A View's call of an "ask" tool (chat/mcp_apps.py), asked in the chat like the model's calls.

The executor asks (`ViewAsking.approve`, its `approve`): the question opens in the one store
(core.questions), with the chat and the turn whose card shows the View, and the approval card
(chat/_question.html) appears under that View in every tab of the chat (a `chat.app` message,
chat/_app_ask.html, marked with the id it swaps into: a tab that does not show it drops it,
static/js/mcp_apps.js). The owner answers it there like any approval (chat.question_views, which
lets them answer it although the turn has ended). The View's request waits meanwhile, holding no
thread; then the call runs or is denied, the card says which, and the View gets the result or
the denial. A page closed or reloaded meanwhile ends the request, which withdraws the question.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from core import questions
from core.redis_client import async_client
from toolsets.models import ToolExecution
from toolsets.policy import approval
from toolsets.policy.approval import ApprovalRequest, Decision

from . import dom, presenters
from .events import AppMessage, group_name

log = logging.getLogger(__name__)

# In an approval's payload: the call whose View asked (its turn may have ended long ago).
KEY = "app_execution_id"
OUTCOMES = {
    approval.APPROVED: "Approved: the app's call runs.",
    approval.DENIED: "Denied: the call did not run, and the app was told so.",
    approval.TIMED_OUT: "Nobody answered in time: the call did not run, and the app was told so.",
}
WITHDRAWN = "The app's page was closed before an answer: the call did not run."


def box(execution: ToolExecution) -> str:
    """The DOM id of the View's box on the call's card (chat/presenters/cards.py `app_view`)."""
    prefix = dom.lane(execution.turn_id or 0, execution.lane)
    return f"mcp-app-{dom.card(prefix, execution.step or 0, execution.position or 0)}"


class ViewAsking:
    """Asks the chat's owner about the calls of one card's View."""

    def __init__(self, execution: ToolExecution, chat_id: int, user_id: int, server: str) -> None:
        self.execution, self.chat_id, self.user_id, self.server = execution, chat_id, user_id, server
        self.box = box(execution)

    async def approve(self, request: ApprovalRequest) -> Decision:
        asked = approval.question(
            request,
            chat_id=self.chat_id,
            turn_id=self.execution.turn_id,
            user_id=self.user_id,
            client=f"mcp-app: {self.server}",
        )
        asked.payload[KEY] = self.execution.pk
        redis = async_client(max_connections=2)
        outcome = WITHDRAWN
        try:
            opened = await questions.ask(redis, asked)
            request.deadline = opened.deadline
            await self._send(self._card(request))
            decision = approval.decision(await questions.wait(redis, asked))
            outcome = OUTCOMES.get(decision.outcome, OUTCOMES[approval.DENIED])
            if decision.approved and decision.always:
                outcome = "Approved, and allowed in this chat from now on: the app's call runs."
            return decision
        finally:
            # Also when the page went away (the request cancelled): nobody can answer it any more.
            await asyncio.shield(questions.close(redis, asked.id))
            await asyncio.shield(self._send(self._done(asked.id, outcome)))
            await asyncio.shield(redis.aclose())

    def _card(self, request: ApprovalRequest) -> str:
        question = presenters.approval(request)
        inner = render_to_string(
            "chat/_app_ask.html", {"card": {"question": question}, "server": self.server, "done": ""}
        )
        return f'<!--app-ask {self.box}-asks--><div hx-swap-oob="beforeend:#{self.box}-asks">{inner}</div>'

    def _done(self, question_id: str, outcome: str) -> str:
        shown = {"question": {"id": question_id}}
        html = render_to_string(
            "chat/_app_ask.html", {"card": shown, "server": self.server, "done": outcome, "oob": True}
        )
        return f"<!--app-ask app-ask-{question_id}-->{html}"

    async def _send(self, html: str) -> None:
        message: AppMessage = {"type": "chat.app", "html": html}
        try:
            await get_channel_layer().group_send(group_name(self.chat_id), message)
        except Exception:  # the View still gets its answer; the card shows again on nothing
            log.warning("Showing an app's question in chat %s failed", self.chat_id, exc_info=True)


def asked_by_view(payload: dict[str, Any]) -> bool:
    return payload.get(KEY) is not None
