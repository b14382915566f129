"""A turn a program starts (the hub's `/v1` and `/mcp`'s agents): what its `model` names, the
chat and turn that run it in a worker, its live states while it runs, and its result in the
shape OpenAI's response has it.

Such a turn runs as any chat's does (chat/worker/turns.py), from a typed request
(chat/worker/request.py) rather than the chat's own transcript."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.db import transaction

from chat import citations, summaries
from chat import selection as sel
from chat.agents import AgentSpec
from chat.agents import registry as agent_registry
from chat.events import group_name
from chat.exchanges import start_turn, title_from
from chat.live import LiveTurn
from chat.models import AppSettings, Chat, LLMModel, Message, Turn, UserChatDefaults
from chat.presenters.cards import tool_display_name
from chat.worker import fair_share
from chat.worker.request import TurnRequest
from core.redis_client import async_client
from toolsets.base import qualified_name
from toolsets.models import ToolExecution
from toolsets.registry import resolve

from .caller import Caller
from .schema import Conversation

DEFAULT_MODEL = "tessera"
AGENT_PREFIX = "agent/"
# How long a follower waits for news before looking at the turn again (a worker that died is
# closed by the reaper, which publishes like any worker).
WAKE_S = 2.0


@dataclass
class Target:
    """What a request's `model` names: the model that answers and, for an agent, the agent."""

    id: str
    model: LLMModel
    agent: AgentSpec | None = None


def targets(user_id: int, *, agents: bool = True) -> dict[str, Target]:
    """The models and agents this user may ask for, by id (blocking); agents only for a token
    that may run them."""
    # The models open to this user (enabled, and for their groups), as the chat's picker offers.
    models = list(LLMModel.for_user(user_id).order_by("-is_default", "id"))
    if not models:
        return {}
    found: dict[str, Target] = {DEFAULT_MODEL: Target(DEFAULT_MODEL, models[0])}
    by_pk = {m.pk: m for m in models}
    for model in models:
        found.setdefault(model.name, Target(model.name, model))
    app = AppSettings.load()
    for agent_id, state in agent_registry.availability(user_id).items() if agents else ():
        if state.usable and app.exposes("openai_api", "agents", agent_id):
            model = by_pk.get(state.agent.model_id or 0, models[0])
            name = AGENT_PREFIX + agent_id
            found[name] = Target(name, model, state.agent)
    return found


def start(caller: Caller, target: Target, conversation: Conversation, save: bool, client: str) -> Turn:
    """A chat (listed only when the caller asked to keep it) and its one turn, sent to the
    workers. For a caller that may not run tools a model answers with none of Tessera's tools;
    an agent always has its own (the caller may run agents). The caller's running turns are
    capped by its principal. Raises `fair_share.Busy`, with nothing created, when the user or
    the caller already runs as many turns as allowed."""
    agent = target.agent
    user_id, principal = caller.user_id, caller.principal
    if agent is not None:
        selection = _agent_selection(user_id, agent)
    elif caller.tools:
        defaults = UserChatDefaults.objects.filter(user_id=user_id).first()
        selection = sel.clean(defaults.enabled_tools) if defaults else sel.default_selection()
    else:
        selection = {}
    if not caller.agents:
        selection.pop(sel.AGENTS, None)  # no subagents for a token that may not run agents
    # Only what the admin exposes over this API (an agent asked for by name is its own choice).
    app = AppSettings.load()
    if agent is None:
        selection = {
            key: ([a for a in names if app.exposes("openai_api", "agents", a)] if key == sel.AGENTS else names)
            for key, names in selection.items()
            if key == sel.AGENTS or app.exposes("openai_api", "toolsets", key)
        }
    request = TurnRequest(
        messages=conversation.messages,
        system=conversation.system,
        tools=conversation.tools,
        agent=agent.id if agent else "",
        client=client,
        principal=principal,
    )
    caps = fair_share.Caps.load()
    admitted: Turn | None = None
    try:
        with transaction.atomic():
            chat = Chat.objects.create(
                owner_id=user_id,
                model=target.model,
                enabled_tools=selection,
                listed=save,
                title=title_from(conversation.question or "API conversation"),
            )
            _, turn = start_turn(
                chat,
                conversation.question,
                parent=None,
                model=target.model,
                metadata={"api": True},
                request=request,
                admitted=True,
            )
            # A slot now, or a 429 (the transaction, chat and turn with it, is rolled back): an
            # API caller has its own timeouts and retries, so it is told rather than queued.
            fair_share.submit(turn.pk, user_id, principal, caps=caps, refuse=True)
            admitted = turn
    except Exception:
        if admitted is not None:  # the commit failed: the slot goes back
            fair_share.release(admitted.pk, user_id, principal)
        raise
    return turn


def _agent_selection(user_id: int, agent: AgentSpec) -> dict[str, list[str]]:
    """An agent works with its own toolsets, or, a general agent, with the user's default
    selection for new chats."""

    def defaults() -> dict[str, list[str]]:
        row = UserChatDefaults.objects.filter(user_id=user_id).first()
        return sel.clean(row.enabled_tools) if row else sel.default_selection()

    return agent_registry.working_selection(agent, defaults)


_clients: dict[int, Any] = {}


def loop_redis() -> Any:
    """One Redis client per event loop (the web process has one), shared by the hub's async code."""
    loop = asyncio.get_running_loop()
    client = _clients.get(id(loop))
    if client is None:
        client = _clients[id(loop)] = async_client(max_connections=32)
    return client


async def states(turn_id: int, chat_id: int) -> AsyncIterator[LiveTurn]:
    """The turn's live state each time it changes, until it has ended. Woken by the fragments
    its worker publishes to the chat's group (no polling while it streams)."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = group_name(chat_id)
    await layer.group_add(group, channel)
    redis = loop_redis()
    try:
        while True:
            state = await LiveTurn.aload(redis, turn_id)
            if state is not None:
                yield state
                if state.status not in ("queued", "running"):
                    return
            elif not await _active(turn_id):
                return
            try:
                await asyncio.wait_for(layer.receive(channel), WAKE_S)
            except TimeoutError:
                pass
    finally:
        await layer.group_discard(group, channel)


def cancel(turn_id: int) -> None:
    """The caller went away or cancelled: the turn stops as at Stop in the chat (blocking)."""
    from chat import live
    from chat.worker import turn_queue

    if Turn.cancel_if_queued(turn_id):
        turn_queue.withdraw(Turn.objects.select_related("chat").get(pk=turn_id))
    else:
        live.request_cancel(turn_id)


async def _active(turn_id: int) -> bool:
    status = await Turn.objects.filter(pk=turn_id).values_list("status", flat=True).afirst()
    return status in Turn.ACTIVE


@dataclass
class Result:
    content: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str
    usage: dict[str, int]
    extension: dict[str, Any]
    failed: bool = False
    error: str = ""
    error_kind: str = ""


def _summary(execution: ToolExecution) -> str:
    found = resolve(qualified_name(execution.toolset, execution.tool))
    if execution.status == ToolExecution.Status.SUCCESS:
        return summaries.summarize(found[1] if found else None, execution.result)
    return summaries.summarize_error(execution.error) if execution.error else execution.status


def _absolute(url: str, base_url: str) -> str:
    """A source's link as a caller elsewhere can open it (a page of this site made absolute)."""
    if url.startswith("/") and not url.startswith("//") and base_url:
        return base_url.rstrip("/") + url
    return url


def result_of(turn_id: int, conversation: Conversation | None, base_url: str = "") -> Result:
    """The finished turn as OpenAI's response has it (blocking: from a thread). `base_url`
    makes links to this site's pages absolute."""
    turn = Turn.objects.get(pk=turn_id)
    answers = list(
        Message.objects.filter(turn_id=turn_id, lane="", role=Message.Role.ASSISTANT)
        .order_by("id")
        .only("content", "tool_calls", "finish_reason")
    )
    request = TurnRequest.of(turn)
    client = request.tool_names if request else set()
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
        }
        for c in ((answers[-1].tool_calls or []) if answers else [])
        if c.get("function", {}).get("name") in client
    ]
    content = "\n\n".join(m.content for m in answers if m.content.strip())
    prompt = int((turn.usage or {}).get("prompt_tokens", 0))
    completion = int((turn.usage or {}).get("completion_tokens", 0))
    executions = list(ToolExecution.objects.filter(turn_id=turn_id).order_by("id"))
    extension = {
        "chat_id": turn.chat_id,
        "turn_id": turn.pk,
        # What the chat's tool cards would say about each server-side call.
        "tool_calls": [
            {
                "toolset": e.toolset,
                "tool": e.tool,
                "name": tool_display_name(qualified_name(e.toolset, e.tool)),
                "status": e.status,
                "summary": _summary(e),
                "duration_ms": e.duration_ms,
                "lane": e.lane,
            }
            for e in executions
        ],
        # The sources the answer's [n] citations refer to, numbered as in the chat.
        "sources": [
            {
                "n": s["n"],
                "title": s["title"],
                "url": _absolute(s.get("url") or "", base_url),
                "kind": s.get("kind", ""),
                "snippet": s.get("snippet", ""),
            }
            for s in citations.from_executions(executions)
        ],
    }
    failed = turn.status not in (Turn.Status.COMPLETED,) and not (turn.status == Turn.Status.CANCELLED and content)
    finish = "tool_calls" if calls else (answers[-1].finish_reason if answers and answers[-1].finish_reason else "stop")
    return Result(
        content=content,
        tool_calls=calls,
        finish_reason=finish if finish in ("stop", "length", "tool_calls", "content_filter") else "stop",
        usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        extension=extension,
        failed=failed,
        error=turn.error,
        error_kind=turn.error_kind,
    )
