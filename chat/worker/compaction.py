"""The host's side of fitting a chat to its model (agent.context): running summaries written
by the admin's summary model and stored per chat, and the fitter each model call goes through."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError

from agent.budget import Budget
from agent.types import Completed, Usage
from chat.models import ContextSummary
from chat.spend.usage import record_call

from .loop import db

INSTRUCTIONS = (
    "You write the running summary of a conversation between a user and an AI assistant that uses "
    "tools. The assistant will continue the conversation from your summary alone, without the "
    "messages it covers. Keep every fact, decision, name, number, file, link and open question "
    "the assistant may need; say which tool results held what (with their handles, e.g. "
    'handle="call_1", so the assistant can read them again). Leave out small talk. Write plain '
    "text, at most about 400 words. Answer with the summary only."
)
# A span can be long: what the summary model reads of each message.
MESSAGE_CHARS = 4000


class StoredSummarizer:
    """Summaries of one chat: looked up by the hash of what they cover, written once."""

    def __init__(self, chat_id: int, model: Any, owner_id: int | None = None, budget: Budget | None = None) -> None:
        self.chat_id = chat_id
        self.model = model  # a agent.llm.LiteLLMModel
        self.owner_id = owner_id  # whose token total the summary's model call counts in
        # The owner's budgets, priced for the summary model: reserved before the call (raising
        # OverBudget, which ends the turn like any call over budget) and settled after it.
        self.budget = budget

    async def lookup(self, keys: list[str]) -> dict[str, str]:
        rows = await db(_stored)(self.chat_id, keys)
        return dict(rows)

    async def make(self, key: str, previous: str, span: list[dict[str, Any]]) -> tuple[str, Usage]:
        parts = [f"Summary so far:\n{previous}"] if previous else []
        parts.append("Messages to add to it:\n" + "\n\n".join(render(m) for m in span))
        messages = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": "\n\n".join(parts)},
        ]
        text, usage = "", Usage()
        finished = False
        reservation = await self.budget.reserve(messages, None) if self.budget is not None else None
        try:
            async for event in self.model.stream(messages, None):
                if isinstance(event, Completed):
                    text, usage, finished = event.message.content.strip(), event.message.usage, True
        finally:
            # A summary is paid for however it ends: a failed or stopped call is charged what it
            # used up to there (the seam counts it), in the budget, the ledger and the user's total.
            spent = usage if finished else getattr(getattr(self.model, "partial", None), "usage", None) or Usage()
            if self.budget is not None:
                await self.budget.settle(reservation, spent)
            if self.owner_id is not None:
                await db(record_call)(self.owner_id, spent)
        text = text or previous
        await db(_store)(self.chat_id, key, len(span), text, self.model.config.model, usage)
        return text, usage


def render(message: dict[str, Any]) -> str:
    """One message as the summary model reads it."""
    role = message.get("role", "")
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "[attachment]")) for p in content if isinstance(p, dict))
    text = str(content or "")[:MESSAGE_CHARS]
    if role == "tool":
        return f"Tool result (handle {message.get('tool_call_id')}): {text}"
    calls = message.get("tool_calls") or []
    called = "; ".join(f"{c['function']['name']}({c['function'].get('arguments', '')})" for c in calls)
    if called:
        text = f"{text} [called {called}]".strip()
    return f"{role.capitalize()}: {text}"


def _stored(chat_id: int, keys: list[str]) -> list[tuple[str, str]]:
    return list(ContextSummary.objects.filter(chat_id=chat_id, key__in=keys).values_list("key", "content"))


def _store(chat_id: int, key: str, covered: int, text: str, model: str, usage: Usage) -> None:
    try:
        ContextSummary.objects.create(
            chat_id=chat_id,
            key=key,
            covered=covered,
            content=text,
            model=model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )
    except IntegrityError:  # the same span summarized by a concurrent turn: theirs is as good
        pass
