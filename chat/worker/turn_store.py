"""Every database write of a running turn, in one place: claim, the transcript it starts from,
its messages and tool results as they happen, checkpoints of the text being streamed, and its
end (finished, or interrupted because its worker died).

Plain blocking functions: the worker calls them through its thread pool (`worker_loop.db`).
Status transitions themselves are `Turn` methods.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agent.types import AssistantMessage, ToolCall, ToolResult
from chat import branches
from chat.live import LiveTurn
from chat.models import Message, Turn
from chat.spend import usage
from toolsets.files import transcript as files_transcript
from toolsets.models import ToolExecution

INTERRUPTED_ERROR = (
    "This answer was interrupted because the worker running it stopped. Send your message again to retry."
)


def claim(turn_id: int) -> Turn | None:
    return Turn.claim(turn_id)


def find(turn_id: int) -> Turn | None:
    return Turn.objects.filter(pk=turn_id).select_related("chat").first()


def transcript(chat_id: int, turn_id: int | None = None, vision: bool = False) -> list[dict[str, Any]]:
    """The stored conversation in provider shape: the branch ending at turn `turn_id` (the
    branch the chat shows when None); other versions of an exchange are never sent. System
    messages belonged to their own turn (e.g. the tool-limit instruction) and are not replayed;
    subagents' transcripts are their cards', and the supervisor saw only their results."""
    rows = _transcript_rows(chat_id, turn_id)
    return files_transcript.with_files(rows, [m.to_openai() for m in rows], vision)


def turn_transcript(
    chat_id: int, turn_id: int, vision: bool, *, first: bool = False
) -> tuple[list[dict[str, Any]], str]:
    """What a turn's model is sent (`transcript`), and the notice for the images of its
    question the model cannot see: one read of the messages and one of their files. `first`:
    the turn has no parent (a chat's first exchange), so its branch is itself and the chat's
    turns need not be read to find it."""
    rows = _transcript_rows(chat_id, turn_id, first=first)
    files = files_transcript.attachments_of(rows)
    messages = files_transcript.with_files(rows, [m.to_openai() for m in rows], vision, files)
    return messages, files_transcript.image_notice(turn_id, rows, files, vision)


# What a transcript reads of each message (`Message.to_openai`, its files, the image notice): a
# long chat's rendered HTML, metadata and timestamps stay in the database.
_TRANSCRIPT_FIELDS = ("id", "turn_id", "role", "content", "tool_calls", "tool_call_id")


def _transcript_rows(chat_id: int, turn_id: int | None, *, first: bool = False) -> list[Message]:
    rows = Message.objects.filter(chat_id=chat_id, lane="").exclude(role=Message.Role.SYSTEM).only(*_TRANSCRIPT_FIELDS)
    if turn_id is None:
        rows = rows.filter(Q(turn__active=True) | Q(turn__isnull=True))
    else:
        branch = [turn_id] if first else branches.ancestry(turn_id, chat_id)
        rows = rows.filter(Q(turn_id__in=branch) | Q(turn__isnull=True))
    return list(rows.order_by("id"))


def save_assistant(
    chat_id: int,
    turn_id: int,
    step: int,
    message: AssistantMessage,
    status: str,
    *,
    html: str,
    html_key: str,
    lane: str = "",
) -> None:
    """A model call's final message (it replaces the step's checkpoint, if one was written)."""
    # A turn's sink saves a step only after that step's last checkpoint finished.
    _put_step_text(
        chat_id,
        turn_id,
        lane,
        step,
        content=message.content,
        tool_calls=[c.to_openai() for c in message.tool_calls] or None,
        metadata={status: True} if status != "complete" else {},
        html=html,
        html_key=html_key,
        **usage.message_fields(message),
    )


def _put_step_text(chat_id: int, turn_id: int, lane: str, step: int, **fields: Any) -> None:
    """Writes a step's assistant message: one UPDATE when the row exists, else one INSERT.
    Callers write a step's row one at a time (a turn's sink), so nothing creates it between
    the two statements."""
    where = {"turn_id": turn_id, "lane": lane, "step": step, "role": Message.Role.ASSISTANT}
    if not Message.objects.filter(**where).update(**fields):
        Message.objects.create(chat_id=chat_id, **where, **fields)


def record_usage(owner_id: int, message: AssistantMessage) -> None:
    """Adds one model call's tokens to its user's total."""
    usage.record_call(owner_id, message.usage)


def finish_model_call(
    chat_id: int,
    owner_id: int,
    turn_id: int,
    step: int,
    message: AssistantMessage,
    status: str,
    *,
    save: bool,
    html: str,
    html_key: str,
    lane: str = "",
) -> None:
    """The end of a model call in one trip to the database thread: its message (when `save`)
    and its tokens."""
    if save:
        save_assistant(chat_id, turn_id, step, message, status, html=html, html_key=html_key, lane=lane)
    record_usage(owner_id, message)


def checkpoint(chat_id: int, turn_id: int, texts: dict[tuple[str, int], str]) -> None:
    """The text streamed so far of each step still streaming, keyed (lane, step): what survives
    a killed worker."""
    for (lane, step), text in texts.items():
        # An UPDATE in the usual case (every checkpoint after a step's first).
        _put_step_text(chat_id, turn_id, lane, step, content=text, metadata={"streaming": True})


def save_system(chat_id: int, turn_id: int, step: int, content: str, lane: str = "") -> None:
    Message.objects.create(
        chat_id=chat_id, turn_id=turn_id, lane=lane, step=step, role=Message.Role.SYSTEM, content=content
    )


def save_subagent_prompt(chat_id: int, turn_id: int, lane: str, messages: list[dict[str, Any]]) -> None:
    """What a subagent was started with (its instructions and task): the head of its transcript."""
    Message.objects.bulk_create(
        Message(chat_id=chat_id, turn_id=turn_id, lane=lane, step=0, role=m["role"], content=m["content"])
        for m in messages
    )


def save_tool_result(
    chat_id: int, turn_id: int, step: int, position: int, call_id: str, result: ToolResult, lane: str = ""
) -> None:
    # Keyed by the call: a result recorded again (the first recording failed after its save)
    # replaces the first, so the transcript never answers one call twice.
    Message.objects.update_or_create(
        turn_id=turn_id,
        lane=lane,
        step=step,
        role=Message.Role.TOOL,
        tool_call_id=call_id,
        defaults={
            "chat_id": chat_id,
            "content": result.content,
            "metadata": {"error": True} if result.is_error else {},
        },
    )
    if result.cancelled:
        ToolExecution.objects.filter(turn_id=turn_id, lane=lane, step=step, position=position, status="running").update(
            status="cancelled", error="Cancelled by the user", error_type="cancelled", finished_at=timezone.now()
        )


def finish(
    turn: Turn,
    status: str,
    *,
    iterations: int,
    error: str,
    error_kind: str,
    notices: list[str | dict[str, str]],
    prompt_tokens: int,
    completion_tokens: int,
    first_token_at: float | None,
    cached_tokens: int = 0,
) -> bool:
    """False if the turn had been closed already (it keeps that end)."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if cached_tokens:
        usage["cached_tokens"] = cached_tokens  # of the prompt tokens, read from the provider's cache
    return turn.close(
        status,
        iterations=iterations,
        error=error,
        error_kind=error_kind,
        notices=notices,
        usage=usage,
        first_token_at=datetime.fromtimestamp(first_token_at, UTC) if first_token_at else None,
    )


def close_interrupted(turn_id: int, live: LiveTurn | None) -> bool:
    """Closes a turn whose worker died, keeping what it had streamed (from Redis's live state,
    or the database checkpoints when that is gone) and giving every stored tool call a result so
    the transcript stays valid for a provider. False if the turn was not running any more (the
    reaper and a redelivered task may both try; one wins)."""
    with transaction.atomic():
        turn = Turn.lock_running(turn_id)
        if turn is None:
            return False
        _keep_streamed_text(turn, live)
        _answer_open_calls(turn)
        ToolExecution.objects.filter(turn=turn, status="running").update(
            status="error", error="Interrupted", error_type="execution_error", finished_at=timezone.now()
        )
        turn.close(Turn.Status.INTERRUPTED, error=INTERRUPTED_ERROR, error_kind="interrupted")
    return True


def _keep_streamed_text(turn: Turn, live: LiveTurn | None) -> None:
    saved = {(m.lane, m.step): m for m in Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT)}
    lanes = [("", live.steps), *live.lanes.items()] if live else []
    for lane, step in ((lane, step) for lane, steps in lanes for step in steps):
        message = saved.get((lane, step.index))
        if message is None and step.text:
            Message.objects.create(
                chat_id=turn.chat_id,
                turn=turn,
                lane=lane,
                step=step.index,
                role=Message.Role.ASSISTANT,
                content=step.text,
                metadata={"stopped": True},
            )
        elif (
            message is not None and (message.metadata or {}).get("streaming") and len(step.text) > len(message.content)
        ):
            # Redis had seen more of the answer than the last checkpoint did.
            message.content = step.text
            message.save(update_fields=["content"])
    # A checkpoint of a running answer becomes what the reader sees of it: a stopped answer.
    for message in saved.values():
        if (message.metadata or {}).get("streaming"):
            Message.objects.filter(pk=message.pk).update(metadata={"stopped": True})


def _answer_open_calls(turn: Turn) -> None:
    answered = set(Message.objects.filter(turn=turn, role=Message.Role.TOOL).values_list("lane", "tool_call_id"))
    for message in Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT, tool_calls__isnull=False):
        for call in message.tool_calls or []:
            if (message.lane, call.get("id")) not in answered:
                Message.objects.create(
                    chat_id=turn.chat_id,
                    turn=turn,
                    lane=message.lane,
                    step=message.step,
                    role=Message.Role.TOOL,
                    tool_call_id=call.get("id", ""),
                    content="Error: interrupted before this tool finished.",
                    metadata={"error": True},
                )


def open_delegation(
    user_id: int,
    turn_id: int,
    lane: str,
    step: int,
    position: int,
    agent_id: str,
    call: ToolCall,
    info: dict[str, Any],
) -> int:
    """A delegation call's execution record, at its place, while its subagent works."""
    record = ToolExecution.objects.create(
        user_id=user_id,
        turn_id=turn_id,
        lane=lane,
        step=step,
        position=position,
        tool_call_id=call.id[:200],
        toolset="agents",
        tool=agent_id,
        arguments={"task": info["task"], "context": info["context"]},
        raw_arguments=call.arguments,
        result={"delegation": info},
    )
    return record.pk


def close_delegation(record_id: int, status: str, info: dict[str, Any], error: str, started: float) -> int:
    """How the delegation ended; returns how long it took, in milliseconds."""
    duration = int((time.monotonic() - started) * 1000)
    ToolExecution.objects.filter(pk=record_id).update(
        status=status,
        result={"delegation": info},
        error=error,
        error_type="execution_error" if status == "error" else "",
        finished_at=timezone.now(),
        duration_ms=duration,
        attempts=1,
    )
    return duration
