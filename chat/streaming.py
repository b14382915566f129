"""The worker's side of a turn: it hears the agent loop's events, persists them, keeps the live
state in Redis and pushes HTML fragments to the chat's group.

Text is batched: deltas gather for a short window and go out as one fragment carrying only the
new characters (finished markdown blocks go out rendered, once). Every other event flushes the
pending text first, so the page sees events in the order they happened. Each fragment has a
sequence number; the live state stored before it is published carries the same number, which is
how a reconnecting page gets the exact state and then continues without gap or duplicate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from functools import cache
from typing import Any

from django.template import Template
from django.template.loader import get_template
from django.utils import timezone

from chat.agent.loop import Outcome
from chat.agent.types import AssistantMessage, ToolCall, ToolResult
from core.redact import redact

from . import live, presenters, usage
from .events import send_fragment
from .models import Message, Turn
from .rendering import fingerprint, render_text, tail_patch
from .worker_loop import db

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 0.2
# A running answer's text is written to the database at least this often (and whenever a block
# finishes), so a worker killed mid-answer loses at most the last few seconds of it, even if
# Redis goes down with it.
CHECKPOINT_S = 2.0


@cache
def template(name: str) -> Template:
    return get_template(name).template  # type: ignore[no-any-return, attr-defined]


def render(name: str, context: dict[str, Any]) -> str:
    from django.template import Context

    return template(name).render(Context(context, autoescape=True))


class TurnSink:
    def __init__(self, turn: Turn, redis: Any, *, window_ms: int, layer: Any = None) -> None:
        self.turn = turn
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        self.redis = redis
        self.layer = layer
        self.window_s = window_ms / 1000
        self.seq = 0
        self.state: dict[str, Any] = {
            "id": turn.pk,
            "status": "running",
            "seq": 0,
            "steps": [],
            "notices": list(turn.notices or []),
            "error": "",
        }
        self._pending: list[str] = []
        self._dirty: set[int] = set()
        self._tails: dict[int, tuple[str, str]] = {}  # step → (tail, tail_html) last pushed
        # step → the finished blocks pushed so far, rendered; stored with the message at the end.
        self._blocks: dict[int, list[str]] = {}
        self._flush_handle: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self.first_token_at: float | None = None
        self._progress_sent: dict[tuple[int, int], float] = {}
        self._checkpointed: dict[int, str] = {}  # step → the text last written to the database
        self._checkpoint_at = time.monotonic()
        self._checkpoint_task: asyncio.Task[None] | None = None
        self._block_finished = False

    # --- helpers ---------------------------------------------------------------------------
    def _step(self, index: int) -> dict[str, Any]:
        for step in reversed(self.state["steps"]):
            if step["index"] == index:
                return step  # type: ignore[no-any-return]
        raise KeyError(index)

    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            self._flush_handle = loop.call_later(self.window_s, lambda: asyncio.ensure_future(self._timed_flush()))

    async def _timed_flush(self) -> None:
        # A failed push must not vanish in an unawaited task: log it. The live state already
        # holds the text, and the page asks for a sync when it sees the gap in sequence numbers.
        try:
            await self.flush()
        except Exception:
            log.exception("Pushing fragments of turn %s failed", self.turn_id)

    def _text_fragments(self, index: int, *, complete: bool) -> str:
        step = self._step(index)
        blocks = self._blocks.setdefault(index, [])
        rendered = render_text(step["text"], complete=complete, already=len(blocks))
        prefix = f"{self.turn_id}-{index}"
        html = []
        if rendered.blocks:
            html.append(f'<div hx-swap-oob="beforeend:#blocks-{prefix}">{"".join(rendered.blocks)}</div>')
        patch = tail_patch(*self._tails.get(index, ("", "")), rendered, complete=complete)
        if patch is not None and patch.replace:
            html.append(f'<div id="tail-{prefix}" class="md-tail" hx-swap-oob="true">{patch.html}</div>')
        elif patch is not None:
            html.append(f'<div hx-swap-oob="beforeend:#tail-{prefix}">{patch.html}</div>')
        self._tails[index] = (rendered.tail, rendered.tail_html)
        blocks.extend(rendered.blocks)
        self._block_finished = self._block_finished or bool(rendered.blocks)
        return "".join(html)

    async def flush(self, extra: str = "") -> None:
        async with self._lock:
            if self._flush_handle is not None:
                self._flush_handle.cancel()
                self._flush_handle = None
            parts = [self._text_fragments(index, complete=False) for index in sorted(self._dirty)]
            self._dirty.clear()
            parts.extend(self._pending)
            self._pending.clear()
            if extra:
                parts.append(extra)
            html = "".join(parts)
            if not html:
                return
            self.seq += 1
            self.state["seq"] = self.seq
            # State first, then the fragment: a page that syncs between the two gets this seq
            # in the state and drops the fragment as a duplicate.
            await self.redis.set(live.key(self.turn_id, "live"), json.dumps(self.state), ex=live.LIVE_TTL_S)
            await send_fragment(self.chat_id, self.turn_id, self.seq, html, self.layer)
            self._maybe_checkpoint()

    # --- durable text ------------------------------------------------------------------------
    def _maybe_checkpoint(self) -> None:
        """Writes streaming steps' text to the database in the background when a block finished
        or CHECKPOINT_S passed; one write at a time, never on the fragment's path."""
        if self._checkpoint_task is not None and not self._checkpoint_task.done():
            return
        if not self._block_finished and time.monotonic() - self._checkpoint_at < CHECKPOINT_S:
            return
        self._block_finished = False
        pending = {
            s["index"]: s["text"]
            for s in self.state["steps"]
            if s["state"] == "streaming" and s["text"] and self._checkpointed.get(s["index"]) != s["text"]
        }
        if not pending:
            return
        self._checkpoint_at = time.monotonic()
        self._checkpointed.update(pending)
        self._checkpoint_task = asyncio.ensure_future(self._checkpoint(pending))

    async def _checkpoint(self, texts: dict[int, str]) -> None:
        try:
            await _checkpoint_text(self.chat_id, self.turn_id, texts)
        except Exception:  # the live state still has the text; the next checkpoint tries again
            log.exception("Saving the partial answer of turn %s failed", self.turn_id)
            for index in texts:
                self._checkpointed.pop(index, None)

    async def _checkpoint_done(self) -> None:
        # The final save of a step must land after any checkpoint of it, never before.
        if self._checkpoint_task is not None:
            await asyncio.gather(self._checkpoint_task, return_exceptions=True)

    def _turn_state_html(self) -> str:
        view = presenters.turn_from_live(self.state)
        return render("chat/_turn_state.html", {"turn": view, "oob": True})

    # --- EventSink ---------------------------------------------------------------------------
    async def started(self) -> None:
        """The worker has claimed the turn: open tabs stop showing it as waiting for one."""
        await self.flush(self._turn_state_html())

    async def step_started(self, step: int) -> None:
        self.state["steps"].append({"index": step, "text": "", "cards": [], "state": "streaming"})
        view = presenters.step(self.turn_id, step, text="", cards=[], state="streaming")
        html = render("chat/_step.html", {"step": view})
        await self.flush(f'<div hx-swap-oob="beforeend:#steps-{self.turn_id}">{html}</div>')

    async def text(self, step: int, delta: str) -> None:
        if self.first_token_at is None:
            self.first_token_at = time.time()
        self._step(step)["text"] += delta
        self._dirty.add(step)
        self._schedule_flush()

    async def tool_call_opened(self, step: int, position: int, call_id: str, name: str) -> None:
        card = presenters.card(self.turn_id, step, position, name=name, call_id=call_id, status="pending")
        self._step(step)["cards"].append(card)
        html = render("chat/_tool_card.html", {"card": card})
        await self.flush(f'<div hx-swap-oob="beforeend:#cards-{self.turn_id}-{step}">{html}</div>')

    async def assistant_message(self, step: int, message: AssistantMessage, status: str) -> None:
        state = self._step(step)
        state["text"] = message.content
        state["state"] = {"complete": "complete", "stopped": "stopped", "failed": "failed"}[status]
        if status != "complete":
            state["cards"] = []  # calls cut off mid-stream never ran
        # The last words go out before the database write: the reader should not wait on it.
        self._dirty.discard(step)
        html = self._text_fragments(step, complete=True)
        if status != "complete":
            html += self._cards_html(step)
        await self.flush(html)
        await self._checkpoint_done()
        state["usage"] = [message.usage.prompt_tokens, message.usage.completion_tokens]
        if message.content or message.tool_calls or status == "complete" or step in self._checkpointed:
            # Every block was rendered for the stream already: stored, a page view need not
            # render them again.
            await _save_assistant(
                chat_id=self.chat_id,
                turn_id=self.turn_id,
                step=step,
                content=message.content,
                tool_calls=[c.to_openai() for c in message.tool_calls] or None,
                metadata={status: True} if status != "complete" else {},
                html="".join(self._blocks.get(step, [])),
                html_key=fingerprint(),
                **usage.message_fields(message),
            )
        await db(usage.record_call)(self.turn_id, message.usage)

    def _cards_html(self, step: int) -> str:
        cards = self._step(step)["cards"]
        return render(
            "chat/_tool_cards.html", {"turn_id": self.turn_id, "step_index": step, "cards": cards, "oob": True}
        )

    async def tools_started(self, step: int, calls: list[ToolCall]) -> None:
        cards = [
            presenters.card(
                self.turn_id,
                step,
                position,
                name=call.name,
                call_id=call.id,
                arguments=call.arguments,
                status="calling",
            )
            for position, call in enumerate(calls)
        ]
        self._step(step)["cards"] = cards
        await self.flush(self._cards_html(step))

    async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult) -> None:
        data = result.data
        status = "cancelled" if result.cancelled else "error" if result.is_error else "success"
        card = presenters.card(
            self.turn_id,
            step,
            position,
            name=call.name,
            call_id=call.id,
            arguments=data.get("arguments", call.arguments),
            status=status,
            result=data.get("result") if status == "success" else None,
            error=data.get("error_message") or (result.content.removeprefix("Error: ") if result.is_error else ""),
            error_type=data.get("error_type", ""),
            duration_ms=data.get("duration_ms"),
            execution_id=data.get("execution_id"),
        )
        self._step(step)["cards"][position] = card
        self._progress_sent.pop((step, position), None)
        await _save_tool_message(self.chat_id, self.turn_id, step, position, call.id, result)
        await self.flush(render("chat/_tool_card.html", {"card": card, "oob": True}))

    async def tool_progress(self, step: int, position: int, text: str, percent: float | None) -> None:
        """A running tool's report; pushed at most every PROGRESS_INTERVAL_S per card."""
        cards = self._step(step)["cards"]
        if position >= len(cards) or cards[position]["status"] != "calling":
            return  # the tool already finished; a late report must not undo that
        now = time.monotonic()
        if now - self._progress_sent.get((step, position), 0.0) < PROGRESS_INTERVAL_S and (percent or 0) < 100:
            return
        self._progress_sent[(step, position)] = now
        old = cards[position]
        card = presenters.card(
            self.turn_id,
            step,
            position,
            name=old["name"],
            call_id=old["call_id"],
            arguments=old["arguments"],
            status="calling",
            progress_text=text,
            progress_percent=percent,
        )
        cards[position] = card
        await self.flush(render("chat/_tool_card.html", {"card": card, "oob": True}))

    async def system_message(self, step: int, content: str) -> None:
        await _save_message(
            chat_id=self.chat_id,
            turn_id=self.turn_id,
            step=step,
            role=Message.Role.SYSTEM,
            content=content,
            tool_calls=None,
            metadata={},
        )

    async def notice(self, kind: str, text: str) -> None:
        self.state["notices"].append(redact(text))
        await self.flush(self._turn_state_html())

    async def finish(self, outcome: Outcome) -> None:
        status = {"completed": Turn.Status.COMPLETED, "cancelled": Turn.Status.CANCELLED, "failed": Turn.Status.FAILED}[
            outcome.status
        ]
        # Provider errors can quote a credential back: redacted before the database, Redis or a page.
        error = redact(outcome.error)
        self.state["status"] = str(status)
        self.state["error"] = error
        self.state["finish_reason"] = outcome.finish_reason
        self.state["usage"] = {
            "prompt_tokens": outcome.usage.prompt_tokens,
            "completion_tokens": outcome.usage.completion_tokens,
        }
        await self._checkpoint_done()
        await _finish_turn(
            self.turn_id,
            status=status,
            outcome=outcome,
            error=error,
            notices=self.state["notices"],
            first_token_at=self.first_token_at,
        )
        await self.flush(self._turn_state_html())


@db
def _save_message(**fields: Any) -> None:
    Message.objects.create(**fields)


@db
def _save_assistant(*, turn_id: int, step: int, **fields: Any) -> None:
    """A step's final assistant message; it replaces the step's checkpoint if there is one."""
    Message.objects.update_or_create(turn_id=turn_id, step=step, role=Message.Role.ASSISTANT, defaults=fields)


@db
def _checkpoint_text(chat_id: int, turn_id: int, texts: dict[int, str]) -> None:
    for step, text in texts.items():
        Message.objects.update_or_create(
            turn_id=turn_id,
            step=step,
            role=Message.Role.ASSISTANT,
            defaults={"chat_id": chat_id, "content": text, "metadata": {"streaming": True}},
        )


@db
def _save_tool_message(chat_id: int, turn_id: int, step: int, position: int, call_id: str, result: ToolResult) -> None:
    from toolsets.models import ToolExecution

    Message.objects.create(
        chat_id=chat_id,
        turn_id=turn_id,
        step=step,
        role=Message.Role.TOOL,
        tool_call_id=call_id,
        content=result.content,
        metadata={"error": True} if result.is_error else {},
    )
    if result.cancelled:
        ToolExecution.objects.filter(turn_id=turn_id, step=step, position=position, status="running").update(
            status="cancelled", error="Cancelled by the user", error_type="cancelled", finished_at=timezone.now()
        )


@db
def _finish_turn(
    turn_id: int, *, status: str, outcome: Outcome, error: str, notices: list[str], first_token_at: float | None
) -> None:
    from datetime import UTC, datetime

    Turn.objects.filter(pk=turn_id).update(
        status=status,
        iterations=outcome.iterations,
        error=error,
        error_kind=outcome.error_kind,
        notices=notices,
        usage={"prompt_tokens": outcome.usage.prompt_tokens, "completion_tokens": outcome.usage.completion_tokens},
        finished_at=timezone.now(),
        first_token_at=datetime.fromtimestamp(first_token_at, UTC) if first_token_at else None,
    )
