"""Running one turn inside a worker: claim it, run the agent loop with a sink, and close it;
and closing a turn whose worker died.

Every turn of a worker process runs in the process's one event loop (`chat.worker_loop`):
Redis, the channel layer, the model stream and parallel tools are all coroutines, so a turn
costs almost nothing while the model is thinking. Database writes are `turn_store`'s, done in
the loop's thread pool; the live state is the sink's `LiveTurn`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.utils import timezone

from chat.agent import spans
from chat.agent.catalogue import ToolBudget
from chat.agent.loop import Agent, CancelToken, Outcome
from core import logs, metrics, tracing
from core.redis_client import sync_client
from toolsets.files import transcript as files_transcript
from toolsets.sources import SourceBook

from . import agents, budgets, live, presenters, turn_store, worker_loop
from .agents import AgentSpec
from .approvals import Asker
from .compaction import StoredSummarizer
from .delegation import Delegator
from .elicitations import Elicitor
from .events import FINAL_SEQ, send_fragment
from .live import LiveTurn
from .models import AppSettings, LLMModel, Turn
from .prompts import system_prompt, user_name
from .streaming import TurnSink
from .tools import ChatToolBox
from .turn_store import INTERRUPTED_ERROR
from .worker_loop import TurnWatch, db

__all__ = ["INTERRUPTED_ERROR", "interrupt", "run_turn", "run_turn_sync"]
log = logging.getLogger(__name__)

UNEXPECTED_ERROR = "Something went wrong while answering. Your message is saved; send it again to retry."
NO_MODEL_ERROR = "No model is configured. An administrator needs to add one."
AGENT_GONE_ERROR = "The agent this conversation asked for is no longer available."


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
        turn = await _claim(turn_id, redis)
        if turn is not None:
            # Every record the turn causes names it (core.logs); the gauge follows it to the end.
            context = logs.turn_context(turn.pk, turn.chat_id, turn.chat.owner_id)
            with context, metrics.TURNS_IN_FLIGHT.track_inprogress(), tracing.continued(trace_carrier):
                metrics.TURNS_STARTED.inc()
                log.info("Turn started")
                with spans.agent(spans.SYSTEM_AGENT, turn_id=turn.pk, chat_id=turn.chat_id):
                    await _run_claimed(turn, redis, watch)
    finally:
        if own:
            await redis.aclose()


async def _claim(turn_id: int, redis: Any) -> Turn | None:
    """Takes the turn if it is queued. A turn found running with no heartbeat was left by a
    dead worker: it is closed as interrupted, never run again (its tools may have side effects)."""
    claimed = await db(turn_store.claim)(turn_id)
    if claimed is not None:
        await redis.set(live.key(turn_id, "alive"), "1", ex=live.ALIVE_TTL_S)
        return claimed
    turn = await db(turn_store.find)(turn_id)
    if turn is None or turn.status != Turn.Status.RUNNING:
        return None
    if await redis.exists(live.key(turn_id, "alive")):
        return None  # another worker is on it (a redelivered message)
    await interrupt(turn, redis)
    return None


async def _run_claimed(turn: Turn, redis: Any, watch: TurnWatch) -> None:
    chat = turn.chat
    sink = TurnSink(turn, redis, window_ms=int(settings.TESSERA["STREAM_WINDOW_MS"]))
    cancel = CancelToken()
    watch.add(turn.pk, cancel)
    try:
        await sink.started()
        llm = turn.model or await db(LLMModel.default)(chat.owner_id)
        if llm is None:
            await sink.finish(Outcome("failed", 0, error=NO_MODEL_ERROR))
            return
        # Groups are read again when the turn runs: a membership change since the send counts.
        if not await db(llm.open_to)(chat.owner_id):
            await sink.finish(Outcome("failed", 0, error=model_not_open_error(llm.name, enabled=llm.enabled)))
            return
        api = turn.api or {}
        app = await db(AppSettings.load)()
        chat_limit = app.effective_iterations(chat)
        # Sent through the OpenAI-compatible API: the caller's conversation, not the chat's.
        agent_spec = (await db(agents.agents)()).get(api["agent"]) if api.get("agent") else None
        if api.get("agent") and agent_spec is None:
            await sink.finish(Outcome("failed", 0, error=AGENT_GONE_ERROR, error_kind="not_found"))
            return
        if agent_spec is not None:
            chat_limit = min(chat_limit, agent_spec.max_iterations)
            if agent_spec.model_id:
                # Only a model open to the owner (groups): an agent does not lend one.
                own = LLMModel.for_user(chat.owner_id).filter(pk=agent_spec.model_id)
                llm = await db(own.first)() or llm
        if "messages" in api:
            messages, unseen = list(api["messages"]), ""
        else:
            vision = files_transcript.model_sees_images(llm.model)
            messages, unseen = await db(turn_store.turn_transcript)(chat.pk, turn.pk, vision)
        if unseen:
            await sink.notice("images", unseen)

        # None without a budget for the owner: then nothing is checked or counted.
        budget = await db(budgets.for_turn)(chat.owner_id, llm, sync_client(), redis)

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
            on_approval=Asker(sink),
            on_elicitation=Elicitor(sink),
            delegator=delegator,
            sources=sources,
            client_tools=api.get("tools") or None,
            client=str(api.get("client") or ""),
        )
        await db(toolbox.prepare)()
        if toolbox.skipped:
            await sink.notice("skipped", "Not available for this answer: " + ", ".join(toolbox.skipped) + ".")
        model = _model(llm, trace_content=app.trace_content)
        # The running summary is written by the admin's summary model, else the chat's.
        summary_llm = await db(_summary_model)(app)
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
        )
        instructions = system_prompt(timezone.now(), user_name(chat.owner), toolbox.instructions)
        if agent_spec is not None:
            instructions = f"{agent_spec.instructions}\n\n{instructions}"
        if api.get("system"):
            instructions += "\n\nThe caller's instructions:\n" + str(api["system"])
        prompt = {"role": "system", "content": instructions}
        outcome = await agent.run([prompt, *messages])
        # Stopped by the worker's shutdown (its grace period ran out), not by the reader.
        await sink.finish(outcome, interrupted=turn.pk in watch.interrupted)
    except Exception:
        log.exception("Turn %s failed", turn.pk)
        await sink.finish(Outcome("failed", 0, error=UNEXPECTED_ERROR, error_kind="internal"))
    finally:
        watch.remove(turn.pk)
        await redis.delete(live.key(turn.pk, "alive"), live.key(turn.pk, "cancel"))


def _model(llm: LLMModel, *, trace_content: bool = False) -> Any:
    # Imported here: LiteLLM is heavy, and only worker processes ever call a model.
    from chat.agent.llm import LiteLLMModel, ModelConfig

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
