"""Running one turn inside a worker: load it, claim it, run the agent loop, persist.

Every turn of a worker process runs in the process's one event loop (`chat.worker_loop`):
Redis, the channel layer, the model stream and parallel tools are all coroutines, so a turn
costs almost nothing while the model is thinking. Database calls hop to the loop's thread pool.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.agent.loop import Agent, CancelToken, Outcome

from . import live, worker_loop
from .models import AppSettings, LLMModel, Message, Turn
from .prompts import system_prompt
from .streaming import TurnSink, render
from .tools import ChatToolBox
from .worker_loop import TurnWatch, db

log = logging.getLogger(__name__)

INTERRUPTED_ERROR = (
    "This answer was interrupted because the worker running it stopped. Send your message again to retry."
)
UNEXPECTED_ERROR = "Something went wrong while answering. Your message is saved; send it again to retry."


def run_turn_sync(turn_id: int) -> None:
    """Entry point for the Celery task: the pool thread waits while the process's loop runs the
    turn."""
    loop = worker_loop.get()
    loop.run(run_turn(turn_id, loop.redis(), loop.watch()))


async def run_turn(turn_id: int, redis: Any = None, watch: TurnWatch | None = None) -> None:
    """Runs one turn; with no Redis client given it makes its own (tests, one-off calls)."""
    own = redis is None
    if own:
        redis = live.async_client()
    watch = watch or TurnWatch(redis, settings.TESSERA["CANCEL_POLL_S"])
    try:
        turn = await _claim(turn_id, redis)
        if turn is None:
            return
        await _run_claimed(turn, redis, watch)
    finally:
        if own:
            await redis.aclose()


async def _claim(turn_id: int, redis: Any) -> Turn | None:
    """Takes the turn if it is queued. A turn found running with no heartbeat was left by a
    dead worker: it is marked interrupted, never run again (its tools may have side effects)."""
    claimed = await db(_claim_in_db)(turn_id)
    if claimed is not None:
        await redis.set(live.key(turn_id, "alive"), "1", ex=live.ALIVE_TTL_S)
        return claimed
    turn = await db(Turn.objects.filter(pk=turn_id).select_related("chat").first)()
    if turn is None or turn.status != Turn.Status.RUNNING:
        return None
    if await redis.exists(live.key(turn_id, "alive")):
        return None  # another worker is on it (a redelivered message)
    await interrupt(turn, redis)
    return None


def _claim_in_db(turn_id: int) -> Turn | None:
    updated = Turn.objects.filter(pk=turn_id, status=Turn.Status.QUEUED).update(
        status=Turn.Status.RUNNING, started_at=timezone.now()
    )
    if not updated:
        return None
    return Turn.objects.select_related("chat", "chat__owner", "model").get(pk=turn_id)


async def _run_claimed(turn: Turn, redis: Any, watch: TurnWatch) -> None:
    # Imported here: LiteLLM is heavy, and only worker processes ever call a model.
    from chat.agent.llm import LiteLLMModel, ModelConfig

    chat = turn.chat
    sink = TurnSink(turn, redis, window_ms=int(settings.TESSERA["STREAM_WINDOW_MS"]))
    cancel = CancelToken()
    watch.add(turn.pk, cancel)
    try:
        await sink.started()
        llm = turn.model or await db(LLMModel.default)()
        if llm is None:
            await sink.finish(Outcome("failed", 0, error="No model is configured. An administrator needs to add one."))
            return
        messages = await db(_transcript)(chat.pk)
        toolbox = ChatToolBox(user_id=chat.owner_id, turn_id=turn.pk, selection=chat.enabled_tools)
        await db(toolbox.prepare)()
        toolbox.on_progress = sink.tool_progress
        if toolbox.skipped:
            await sink.notice("skipped", "Not available for this answer: " + ", ".join(toolbox.skipped) + ".")
        model = LiteLLMModel(
            ModelConfig(
                model=llm.model,
                api_base=llm.api_base or None,
                api_key=llm.api_key or None,
                extra=llm.litellm_kwargs(),
                retries=int(settings.TESSERA["PROVIDER_RETRIES"]),
                backoff_s=settings.TESSERA["PROVIDER_BACKOFF_S"],
            )
        )
        app = await db(AppSettings.load)()
        agent = Agent(model, toolbox, sink, cancel, max_iterations=app.effective_iterations(chat))
        prompt = {"role": "system", "content": system_prompt(timezone.now())}
        outcome = await agent.run([prompt, *messages])
        await sink.finish(outcome)
    except Exception:
        log.exception("Turn %s failed", turn.pk)
        await sink.finish(Outcome("failed", 0, error=UNEXPECTED_ERROR, error_kind="internal"))
    finally:
        watch.remove(turn.pk)
        await redis.delete(live.key(turn.pk, "alive"), live.key(turn.pk, "cancel"))


def _transcript(chat_id: int) -> list[dict[str, Any]]:
    """The stored conversation in provider shape. System messages belonged to their own turn
    (e.g. the tool-limit instruction) and are not replayed."""
    rows = Message.objects.filter(chat_id=chat_id).exclude(role=Message.Role.SYSTEM).order_by("id")
    return [m.to_openai() for m in rows]


async def interrupt(turn: Turn, redis: Any) -> bool:
    """Closes a turn whose worker died: keeps what was streamed and says what happened. Returns
    False if the turn was no longer running (closed meanwhile by someone else)."""
    state = await live.aread_state(redis, turn.pk)
    if not await db(_persist_interrupted)(turn.pk, state):
        return False
    from . import presenters
    from .events import FINAL_SEQ, send_fragment

    if state is None:
        # Redis lost the live state (it died with the worker): what the database kept — the
        # checkpoints of the answer — is the whole turn, sent as a final full frame.
        view = await db(_stored_turn_view)(turn.pk)
        html = render("chat/_turn.html", {"turn": {**view, "seq": FINAL_SEQ}, "oob": True})
        await send_fragment(turn.chat_id, turn.pk, FINAL_SEQ, html, full=True)
        return True
    state["status"] = "interrupted"
    state["error"] = INTERRUPTED_ERROR
    state["seq"] = int(state.get("seq", 0)) + 1
    for step in state["steps"]:
        if step["state"] == "streaming":
            step["state"] = "stopped"
    import json

    await redis.set(live.key(turn.pk, "live"), json.dumps(state), ex=live.LIVE_TTL_S)
    view = presenters.turn_from_live(state)
    html = render("chat/_turn.html", {"turn": view, "oob": True})
    await send_fragment(turn.chat_id, turn.pk, state["seq"], html)
    return True


def _stored_turn_view(turn_id: int) -> dict[str, Any]:
    from toolsets.models import ToolExecution

    from . import presenters

    turn = Turn.objects.get(pk=turn_id)
    messages = list(Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).order_by("id"))
    return presenters.turn_from_db(turn, messages, list(ToolExecution.objects.filter(turn=turn)))


def _persist_interrupted(turn_id: int, state: dict[str, Any] | None) -> bool:
    with transaction.atomic():
        # Claimed under a row lock: of two callers (the reaper and a redelivered task), one wins.
        turn = Turn.objects.select_for_update().filter(pk=turn_id, status=Turn.Status.RUNNING).first()
        if turn is None:
            return False
        _close_interrupted(turn, state)
    return True


def _close_interrupted(turn: Turn, state: dict[str, Any] | None) -> None:
    turn_id = turn.pk
    saved = {m.step: m for m in Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT)}
    for step in (state or {}).get("steps", []):
        message = saved.get(step["index"])
        if message is None and step["text"]:
            Message.objects.create(
                chat_id=turn.chat_id,
                turn=turn,
                step=step["index"],
                role=Message.Role.ASSISTANT,
                content=step["text"],
                metadata={"stopped": True},
            )
        elif (
            message is not None
            and (message.metadata or {}).get("streaming")
            and len(step["text"]) > len(message.content)
        ):
            # Redis has seen more of the answer than the last checkpoint did.
            message.content = step["text"]
            message.save(update_fields=["content"])
    # Checkpoints of a running answer become what the reader sees of it: a stopped answer.
    for message in saved.values():
        if (message.metadata or {}).get("streaming"):
            Message.objects.filter(pk=message.pk).update(metadata={"stopped": True})
    # Every stored tool call needs a result, or the transcript cannot be sent to a provider.
    answered = set(Message.objects.filter(turn=turn, role=Message.Role.TOOL).values_list("tool_call_id", flat=True))
    for message in Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).filter(tool_calls__isnull=False):
        for call in message.tool_calls or []:
            if call.get("id") not in answered:
                Message.objects.create(
                    chat_id=turn.chat_id,
                    turn=turn,
                    step=message.step,
                    role=Message.Role.TOOL,
                    tool_call_id=call.get("id", ""),
                    content="Error: interrupted before this tool finished.",
                    metadata={"error": True},
                )
    from toolsets.models import ToolExecution

    ToolExecution.objects.filter(turn=turn, status="running").update(
        status="error", error="Interrupted", error_type="execution_error", finished_at=timezone.now()
    )
    Turn.objects.filter(pk=turn_id).update(
        status=Turn.Status.INTERRUPTED, error=INTERRUPTED_ERROR, error_kind="interrupted", finished_at=timezone.now()
    )
