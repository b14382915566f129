"""Running one turn inside a worker: claim it, run the agent loop with a sink, and close it;
and closing a turn whose worker died.

Every turn of a worker process runs in the process's one event loop (`chat.worker.loop`):
Redis, the channel layer, the model stream and parallel tools are all coroutines, so a turn
costs almost nothing while the model is thinking. Database writes are `turn_store`'s, done in
the loop's thread pool; the live state is the sink's `LiveTurn`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from agent import spans
from agent.catalogue import ToolBudget
from agent.loop import Agent, CancelToken, Outcome
from chat import agents, app_context, live, pending, presenters
from chat.agents import AgentSpec
from chat.events import FINAL_SEQ, send_fragment
from chat.live import LiveTurn
from chat.models import AppSettings, LLMModel, Turn
from chat.spend import budgets
from core import logs, metrics, tracing
from core.redis_client import sync_client
from memory import prompt as memory_prompt
from toolsets.files import transcript as files_transcript
from toolsets.sources import SourceBook

from . import fair_share, owner_facts, turn_queue, turn_store
from . import loop as worker_loop
from .asking import Asking
from .compaction import StoredSummarizer
from .delegation import Delegator
from .loop import TurnWatch, db
from .prompts import last_user_text, system_prompt, user_name
from .request import TurnRequest
from .steering import TurnInbox
from .streaming import TurnSink
from .tools import ChatToolBox
from .turn_store import INTERRUPTED_ERROR

__all__ = ["INTERRUPTED_ERROR", "interrupt", "run_turn", "run_turn_sync"]
log = logging.getLogger(__name__)

UNEXPECTED_ERROR = "Something went wrong while answering. Your message is saved; send it again to retry."
NO_MODEL_ERROR = "No model is configured. An administrator needs to add one."
AGENT_GONE_ERROR = "The agent this conversation asked for is no longer available."


def agent_closed_error(name: str, reason: str) -> str:
    return f"The agent {name} this conversation is held as is not available to you: {reason}."


def model_not_open_error(name: str, *, enabled: bool = True) -> str:
    why = "is not available to your groups" if enabled else "was turned off by an administrator"
    return f"The model {name} {why}. Choose another one in the chat's settings."


def run_turn_sync(turn_id: int, trace_carrier: dict[str, str] | None = None) -> None:
    """Entry point for the Celery task: the pool thread waits while the process's loop runs the
    turn."""
    loop = worker_loop.get()
    loop.run(run_turn(turn_id, loop.redis(), loop.watch(), trace_carrier=trace_carrier))


async def run_turn(
    turn_id: int, redis: Any = None, watch: TurnWatch | None = None, trace_carrier: dict[str, str] | None = None
) -> None:
    """Runs one turn; with no Redis client given it makes its own (tests, one-off calls).
    `trace_carrier`: the trace context of the request that sent the message (core/tracing.py);
    the turn's span continues that trace (attached here, in the loop's own task, because the
    loop runs in another thread than the Celery task)."""
    own = redis is None
    if own:
        redis = live.async_client()
    watch = watch or TurnWatch(redis, settings.TESSERA["CANCEL_POLL_S"])
    try:
        claimed = await _claim(turn_id, redis)
        if claimed is not None:
            turn, views = claimed
            owner, token = turn.chat.owner_id, turn_queue.principal(turn)
            try:
                # Every record the turn causes names it (core.logs); the gauge follows it to the end.
                context = logs.turn_context(turn.pk, turn.chat_id, owner)
                with context, metrics.TURNS_IN_FLIGHT.track_inprogress(), tracing.continued(trace_carrier):
                    metrics.TURNS_STARTED.inc()
                    log.info("Turn started")
                    with spans.agent(spans.SYSTEM_AGENT, turn_id=turn.pk, chat_id=turn.chat_id):
                        await _run_claimed(turn, redis, watch, views)
            finally:
                # The heartbeat, the Stop flag and the steer mailbox go with the slot, in its round
                # trip (a steer the loop did not take is still a row: chat/pending.py).
                ended = (live.key(turn.pk, "alive"), live.key(turn.pk, "cancel"), pending.mailbox_key(turn.pk))
                await db(_ended)(turn.pk, owner, token, ended)
    finally:
        if own:
            await redis.aclose()


def _ended(turn_id: int, owner: int, token: str, ended: tuple[str, ...]) -> None:
    """The slot goes back, then the chat's waiting messages move on (chat/pending.py): the next
    queued one starts. One trip to the database thread for both (blocking)."""
    turn_queue.released(turn_id, owner, token, ended)
    try:
        pending.after_turn(turn_id)
    except Exception:
        # Nothing is lost: the messages stay queued, and the page offers to send them.
        log.exception("Starting the queued messages after turn %s failed", turn_id)


async def _claim(turn_id: int, redis: Any) -> tuple[Turn, str] | None:
    """Takes the turn if it is queued. A turn found running with no heartbeat was left by a
    dead worker: it is closed as interrupted, never run again (its tools may have side effects)."""
    claimed = await db(_claim_and_hold)(turn_id)
    if claimed is not None:
        return claimed
    turn = await db(turn_store.find)(turn_id)
    if turn is None:
        return None
    if turn.status == Turn.Status.RUNNING and await redis.exists(live.key(turn_id, "alive")):
        return None  # another worker is on it (a redelivered message)
    if turn.status == Turn.Status.RUNNING:
        await interrupt(turn, redis)
    # Stopped while it waited for a worker, or ended already: whatever slot it held goes back.
    await db(turn_queue.released)(turn.pk, turn.chat.owner_id, turn_queue.principal(turn))
    return None


def _claim_and_hold(turn_id: int) -> tuple[Turn, str] | None:
    """Claims the turn (blocking); a claimed turn's slot of its owner's fair share is held by its
    heartbeat from now on, and handed to the owner's next queued turn however it ends. One trip
    to the database thread for both, and one round trip to Redis for the slot, the heartbeat and
    what the chat's MCP Apps' Views told the model (chat/app_context.py), returned with the turn."""
    claimed = turn_store.claim(turn_id)
    if claimed is None:
        return None
    heartbeat = (live.key(claimed.pk, "alive"), live.ALIVE_TTL_S)
    owner, principal = claimed.chat.owner_id, turn_queue.principal(claimed)
    views = fair_share.claimed(claimed.pk, owner, principal, heartbeat, read=app_context.key(claimed.chat_id))
    return claimed, app_context.prompt(views)


async def _run_claimed(turn: Turn, redis: Any, watch: TurnWatch, views: str) -> None:
    chat = turn.chat
    sink = TurnSink(turn, redis, window_ms=int(settings.TESSERA["STREAM_WINDOW_MS"]))
    cancel = CancelToken()
    watch.add(turn.pk, cancel)
    try:
        await sink.started()
        # Everything the turn reads before its first model call, in one trip to the database
        # thread (each trip costs the loop a thread hop and Django's connection upkeep).
        ready = await db(_prepare)(turn, redis, views)
        if isinstance(ready, Outcome):
            await sink.finish(ready)
            return
        llm, app, agent_spec, chat_limit = ready.llm, ready.app, ready.agent_spec, ready.chat_limit
        request, budget = ready.request, ready.budget
        if ready.unseen:
            await sink.notice("images", ready.unseen)

        async def model_for(agent: AgentSpec) -> tuple[Any, Any]:
            # An agent may have a model of its own (an admin's choice); else the chat's.
            # Only one open to the chat's owner: an agent does not lend a model the owner may not use.
            models = LLMModel.for_user(chat.owner_id)
            own = await db(models.filter(pk=agent.model_id).first)() if agent.model_id else None
            chosen = own or llm
            return _model(chosen, trace_content=app.trace_content), budget.priced_for(chosen) if budget else None

        sources = SourceBook()
        delegator = None
        if app.max_delegation_depth >= 1:
            delegator = Delegator(
                sink=sink,
                cancel=cancel,
                model_for=model_for,
                user_id=chat.owner_id,
                selection=chat.enabled_tools or {},
                chat_limit=chat_limit,
                max_depth=app.max_delegation_depth,
                sources=sources,
                tool_budget=tool_budget(app),
            )
        toolbox = ChatToolBox(
            user_id=chat.owner_id,
            turn_id=turn.pk,
            chat_id=chat.pk,
            selection=chat.enabled_tools,
            on_progress=sink.tool_progress,
            on_partial=sink.tool_partial,
            asking=Asking(sink),
            delegator=delegator,
            sources=sources,
            client_tools=(request.tools or None) if request else None,
            client=request.client if request else "",
            # A /v1 or /mcp caller's agent answers as the assistant: its bases are the searched ones.
            scope=agent_spec.scope if agent_spec else None,
        )
        await db(toolbox.prepare)(ready.groups, ready.offered)
        if toolbox.skipped:
            await sink.notice("skipped", "Not available for this answer: " + ", ".join(toolbox.skipped) + ".")
        model = _model(llm, trace_content=app.trace_content)
        # The running summary is written by the admin's summary model, else the chat's.
        summary_llm = ready.summary_llm
        summarizer = StoredSummarizer(
            chat.pk,
            _model(summary_llm, trace_content=app.trace_content) if summary_llm else model,
            chat.owner_id,
            # A summary is a model call like any other: reserved and priced with its own model.
            budget=budget.priced_for(summary_llm or llm) if budget else None,
        )
        agent = Agent(
            model,
            toolbox,
            sink,
            cancel,
            max_iterations=chat_limit,
            fitter=model.fitter(summarizer),
            tool_budget=tool_budget(app),
            budget=budget,
            inbox=TurnInbox(chat.pk, turn.pk, redis) if request is None else None,
        )
        instructions = system_prompt(timezone.now(), user_name(chat.owner), toolbox.instructions)
        # What MCP Apps' Views in this chat last told the model (chat/app_context.py).
        instructions += ready.app_context + ready.memories
        if agent_spec is not None:
            instructions = f"{agent_spec.instructions}\n\n{instructions}"
        if request is not None and request.system:
            instructions += "\n\nThe caller's instructions:\n" + request.system
        prompt = {"role": "system", "content": instructions}
        outcome = await agent.run([prompt, *ready.messages])
        # Stopped by the worker's shutdown (its grace period ran out), not by the reader.
        await sink.finish(outcome, interrupted=turn.pk in watch.interrupted)
    except Exception:
        log.exception("Turn %s failed", turn.pk)
        await sink.finish(Outcome("failed", 0, error=UNEXPECTED_ERROR, error_kind="internal"))
    finally:
        # Its heartbeat and Stop flag are deleted with its slot (run_turn).
        watch.remove(turn.pk)


@dataclass
class _Ready:
    """What `_prepare` read for a turn."""

    llm: LLMModel
    app: AppSettings
    agent_spec: AgentSpec | None
    chat_limit: int
    messages: list[dict[str, Any]]
    unseen: str
    budget: Any
    summary_llm: LLMModel | None
    groups: frozenset[int]
    request: TurnRequest | None  # a program's (the hub's), or None for the chat's own turn
    app_context: str  # what MCP Apps' Views in the chat told the model, for the system prompt
    memories: str  # what the owner asked the assistant to remember, most relevant first
    offered: dict[str, bool]  # toolsets offered to the owner or not, known from the owner's facts


def _prepare(turn: Turn, redis: Any, views: str) -> _Ready | Outcome:
    """The turn's model (open to its owner), the app's settings, the API caller's agent, the
    transcript, the owner's budget, the summary model and the owner's memories (blocking); or the
    Outcome that ends the turn before it starts. `views`: the Views' context, read at the claim."""
    chat = turn.chat
    llm = turn.model or LLMModel.default(chat.owner_id)
    if llm is None:
        return Outcome("failed", 0, error=NO_MODEL_ERROR)
    # Groups are read again when the turn runs (once, for the model, the budgets and the
    # toolsets): a membership change since the send counts. With them, in the same query, the
    # model's groups and whether a budget applies.
    facts = owner_facts.read(chat.owner_id, llm.pk)
    groups = facts.groups
    if not llm.open_to(chat.owner_id, groups, limited_to=facts.model_groups):
        return Outcome("failed", 0, error=model_not_open_error(llm.name, enabled=llm.enabled))
    request = TurnRequest.of(turn)
    app = AppSettings.load()
    chat_limit = app.effective_iterations(chat)
    # The agent the API caller named for this turn, or the one the chat is held as.
    agent_id = request.agent if request and request.agent else chat.agent
    agent_spec = agents.agents().get(agent_id) if agent_id else None
    if agent_id and agent_spec is None:
        return Outcome("failed", 0, error=AGENT_GONE_ERROR, error_kind="not_found")
    if agent_spec is not None and agent_id == chat.agent:
        # A chat held as an agent may outlive the owner's right to it (groups, toolsets): checked
        # at each turn, as the hub checks a caller's at each request.
        state = agents.availability(chat.owner_id, {agent_id: agent_spec}, groups=groups)[agent_id]
        if not state.usable:
            return Outcome("failed", 0, error=agent_closed_error(agent_spec.name, state.reason), error_kind="not_found")
    if agent_spec is not None:
        chat_limit = min(chat_limit, agent_spec.max_iterations)
        if agent_spec.model_id:
            # Only a model open to the owner (groups): an agent does not lend one.
            llm = LLMModel.for_user(chat.owner_id).filter(pk=agent_spec.model_id).first() or llm
    if request is not None and request.messages is not None:
        messages, unseen = list(request.messages), ""
    else:
        vision = files_transcript.model_sees_images(llm.model)
        messages, unseen = turn_store.turn_transcript(chat.pk, turn.pk, vision, first=turn.parent_id is None)
    # None without a budget for the owner (nor, for a run, its automation's): then nothing is
    # checked or counted (nor read).
    extra = budgets.run_counters(chat.pk, sync_client()) if chat.automated else []
    budget = (
        budgets.for_turn(chat.owner_id, llm, sync_client(), redis, groups, budgeted=facts.budgeted, extra=extra)
        if facts.budgeted or extra
        else None
    )
    return _Ready(
        llm,
        app,
        agent_spec,
        chat_limit,
        messages,
        unseen,
        budget,
        _summary_model(app),
        groups,
        request,
        views,
        # Read only when there is something to offer (memory on, some saved): most owners have none.
        memory_prompt.for_turn(chat.owner_id, last_user_text(messages), llm.context_window) if facts.remembers else "",
        facts.offered(),
    )


def _model(llm: LLMModel, *, trace_content: bool = False) -> Any:
    # Imported here: LiteLLM is heavy, and only worker processes ever call a model.
    from agent.llm import LiteLLMModel, ModelConfig

    return LiteLLMModel(
        ModelConfig(
            model=llm.model,
            api_base=llm.api_base or None,
            api_key=llm.api_key or None,
            extra=llm.litellm_kwargs(),
            retries=int(settings.TESSERA["PROVIDER_RETRIES"]),
            backoff_s=settings.TESSERA["PROVIDER_BACKOFF_S"],
            fast_path=bool(settings.TESSERA["FAST_PATH"]),
            trace_content=trace_content,
            context_limit=llm.context_window,
            answer_reserve=llm.answer_reserve,
        )
    )


def tool_budget(app: AppSettings) -> ToolBudget:
    return ToolBudget(count=app.tool_catalogue_count, tokens=app.tool_catalogue_tokens)


def _summary_model(app: AppSettings) -> LLMModel | None:
    chosen = app.summary_model
    return chosen if chosen is not None and chosen.enabled else None


async def interrupt(turn: Turn, redis: Any) -> bool:
    """Closes a turn whose worker died: keeps what was streamed, says what happened, and tells
    open tabs. False if the turn was no longer running (closed meanwhile by someone else)."""
    state = await LiveTurn.aload(redis, turn.pk)
    if not await db(turn_store.close_interrupted)(turn.pk, state):
        return False
    metrics.TURNS_FINISHED.labels("interrupted").inc()
    if state is None:
        # Redis lost the live state (it died with the worker): what the database kept — the
        # checkpoints of the answer — is the whole turn, sent as a final full frame.
        view = await db(presenters.stored_turn_view)(turn.pk)
        if view is not None:
            html = presenters.turn_fragment({**view, "seq": FINAL_SEQ})
            await send_fragment(turn.chat_id, turn.pk, FINAL_SEQ, html, full=True)
        return True
    state.interrupt(INTERRUPTED_ERROR)
    await state.publish(redis, lambda s: presenters.turn_fragment(presenters.turn_from_live(s)), full=True)
    return True
