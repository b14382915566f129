"""The worker's side of a turn: `TurnSink` hears the agent loop's events and hands each to its
owner — the turn's state to its `LiveTurn` (which publishes), the HTML to the presenters, the
writes to `turn_store` — and decides when: text is batched, everything else goes at once.

Text deltas gather for a short window and go out as one fragment carrying only the new
characters (finished Markdown blocks go out rendered, once). Every other event flushes the
pending text first, so the page sees events in the order they happened. While a step streams,
its text is also written to the database now and then (chat/worker/checkpoints.py), so a
killed worker loses at most the last seconds of an answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from agent import spans
from agent.loop import Outcome
from agent.types import AssistantMessage, ToolCall, ToolResult, Usage
from chat import citations, dom, events, presenters
from chat.app_input import partial_arguments
from chat.live import LiveTurn
from chat.models import Turn
from chat.rendering import fingerprint
from core import metrics
from core.redact import redact
from toolsets.files import transcript as files_transcript

from . import turn_store
from .checkpoints import Checkpoints
from .loop import db

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 0.2
TIMER_SLACK_S = 0.001
FINAL_STATUS = {"completed": Turn.Status.COMPLETED, "cancelled": Turn.Status.CANCELLED, "failed": Turn.Status.FAILED}
# The outcome a finished turn is counted under in the metrics.
OUTCOME_LABEL = {
    Turn.Status.COMPLETED: "completed",
    Turn.Status.FAILED: "failed",
    Turn.Status.CANCELLED: "stopped",
    Turn.Status.INTERRUPTED: "interrupted",
}


class TurnSink:
    def __init__(self, turn: Turn, redis: Any, *, window_ms: int, layer: Any = None) -> None:
        self.turn = turn
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        # Whether the chat is a run (loaded with the claimed turn; None: not known here).
        self.automated: bool | None = turn.chat.automated if type(turn).chat.is_cached(turn) else None
        self.redis = redis
        self.layer = layer
        self.window_s = window_ms / 1000
        self.live = LiveTurn(turn.pk, turn.chat_id, notices=list(turn.notices or []))
        self.first_token_at: float | None = None
        self._started_at = time.time()
        # When the oldest event not yet published happened: a fragment's latency runs from it.
        self._unsent_since: float | None = None
        # (lane, step) → what the page has of that step's text; lane "" is the turn's own steps.
        self._texts: dict[tuple[str, int], presenters.StepText] = {}
        self._pending: list[str] = []
        self._dirty: set[tuple[str, int]] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._flushing: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()
        self._progress_sent: dict[tuple[str, int, int], float] = {}
        self.checkpoints = Checkpoints(self.live, turn.chat_id, turn.pk)
        self.subagent_usage = Usage()
        # The person's guidance the agent took, shown on the step that reads it (chat/pending.py).
        self._steered: dict[int, list[str]] = {}

    @property
    def seq(self) -> int:
        return self.live.seq

    # --- pushing ------------------------------------------------------------------------------
    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            loop = asyncio.get_running_loop()
            # Event loops wait in whole milliseconds (epoll), so a timer fires up to 1 ms after it
            # is due: aimed that much early, the batch leaves at the end of its window, not after.
            delay = max(0.0, self.window_s - TIMER_SLACK_S)
            self._flush_handle = loop.call_later(delay, self._window_over)

    def _window_over(self) -> None:
        """The batch's window is over. It usually leaves right here, in the timer's callback,
        written to Redis without waiting for the reply (nothing after it in this turn waits on
        that reply): no task and no second wake-up per fragment. While another flush is under way,
        or when that fast way is not open (see `events.sender_nowait`), a task flushes it."""
        self._flush_handle = None
        send = None if self._lock.locked() else events.sender_nowait(self.layer)
        if send is None:
            # Held until done: the loop keeps only a weak reference to a task.
            task = asyncio.ensure_future(self._timed_flush())
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)
            return
        html, since = self._take()
        if html:
            self.live.publish_nowait(send, html)
            self._sent(since or time.monotonic())

    async def _timed_flush(self) -> None:
        # A failed push must not vanish in an unawaited task: log it. The live state already
        # holds the text, and the page asks for a sync when it sees the gap in sequence numbers.
        try:
            await self.flush()
        except Exception:
            log.exception("Pushing fragments of turn %s failed", self.turn_id)

    def _text_fragments(self, key: tuple[str, int], *, complete: bool) -> str:
        lane, index = key
        cite = citations.by_number(self.live.sources, self.turn_id)
        html, finished = self._texts[key].fragments(self.live.step(index, lane).text, complete=complete, cite=cite)
        self.checkpoints.block_finished = self.checkpoints.block_finished or finished
        return html

    def _take(self, extra: str = "") -> tuple[str, float | None]:
        """Everything not yet sent, as one fragment (the text first, in the order it came), and
        when the oldest of it happened."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        parts = [self._text_fragments(key, complete=False) for key in sorted(self._dirty)]
        self._dirty.clear()
        parts.extend(self._pending)
        self._pending.clear()
        if extra:
            parts.append(extra)
        since, self._unsent_since = self._unsent_since, None
        return "".join(parts), since

    async def flush(self, extra: str = "") -> None:
        started = time.monotonic()
        async with self._lock:
            html, since = self._take(extra)
            if not html:
                return
            await self.live.publish(self.redis, html, self.layer)
            self._sent(since or started)

    def _sent(self, since: float) -> None:
        """A fragment went out: its latency counted from `since` (its oldest text, else when its
        flush began), and the text saved now and then."""
        metrics.FRAGMENT_LATENCY.observe(time.monotonic() - since)
        self.checkpoints.maybe()

    # --- EventSink ----------------------------------------------------------------------------
    async def started(self) -> None:
        """The worker has claimed the turn: open tabs stop showing it as waiting for one."""
        await self.flush(presenters.turn_state_fragment(self.live))

    async def step_started(self, step: int, lane: str = "") -> None:
        live_step = self.live.start_step(step, lane)
        if not lane:
            live_step.steered = self._steered.pop(step, [])
        prefix = dom.lane(self.turn_id, lane)
        self._texts[(lane, step)] = presenters.StepText(prefix, step)
        await self.flush(presenters.new_step_fragment(prefix, step, live_step.steered))

    async def steered(self, step: int, texts: list[str], lane: str = "") -> None:
        """The agent read the person's guidance (already stored): shown atop the step about to start
        as the person wrote it (the notes on its files are the model's, as after a reload)."""
        self._steered.setdefault(step, []).extend(text.split(files_transcript.FILES_MARK, 1)[0] for text in texts)

    async def text(self, step: int, delta: str, lane: str = "") -> None:
        if self.first_token_at is None:
            self.first_token_at = time.time()
            metrics.FIRST_TOKEN.observe(self.first_token_at - self._started_at)
        if self._unsent_since is None:
            self._unsent_since = time.monotonic()
        live_step = self.live.step(step, lane)
        leading = not live_step.text and bool(delta)
        live_step.text += delta
        self._dirty.add((lane, step))
        if leading:
            # A step's first words leave at once (the reader is waiting for them); the window
            # only gathers what follows.
            await self.flush()
        else:
            self._schedule_flush()

    async def tool_call_opened(self, step: int, position: int, call_id: str, name: str, lane: str = "") -> None:
        prefix = dom.lane(self.turn_id, lane)
        card = presenters.card(prefix, step, position, name=name, call_id=call_id, status="pending")
        self.live.step(step, lane).cards.append(card)
        await self.flush(presenters.new_card_fragment(prefix, step, card))

    async def tool_arguments(self, step: int, position: int, text: str, lane: str = "") -> None:
        """The arguments so far of a call whose card shows an MCP App: its View is shown them
        (`tool-input-partial`); other cards wait for the whole call."""
        cards = self.live.step(step, lane).cards
        if position >= len(cards) or cards[position]["status"] != "pending" or not cards[position].get("app"):
            return
        shown = partial_arguments(text)
        if shown is not None and shown != cards[position]["app"].get("input"):
            await self._redraw_card(step, position, lane, partial_input=shown)

    async def assistant_message(self, step: int, message: AssistantMessage, status: str, lane: str = "") -> None:
        state = "complete" if status == "complete" else status
        live_step = self.live.end_step(step, message.content, state, lane)  # type: ignore[arg-type]
        # The last words go out before the database write: the reader should not wait on it.
        key = (lane, step)
        self._dirty.discard(key)
        html = self._text_fragments(key, complete=True)
        if status != "complete":
            html += presenters.cards_fragment(dom.lane(self.turn_id, lane), step, live_step.cards, self.live)
        await self.flush(html)
        await self.checkpoints.done()
        live_step.usage = [message.usage.prompt_tokens, message.usage.completion_tokens]
        metrics.TOKENS.labels("prompt").inc(message.usage.prompt_tokens)
        metrics.TOKENS.labels("completion").inc(message.usage.completion_tokens)
        save = bool(message.content or message.tool_calls or status == "complete" or key in self.checkpoints.saved)
        # Every block was rendered for the stream already: stored, a page view need not render
        # them again. The message and the tokens go in one trip to the database thread.
        await db(turn_store.finish_model_call)(
            self.chat_id,
            self.turn.chat.owner_id,
            self.turn_id,
            step,
            message,
            status,
            save=save,
            html=self._texts[key].html if save else "",
            html_key=fingerprint() if save else "",
            lane=lane,
        )

    async def tools_started(self, step: int, calls: list[ToolCall], lane: str = "") -> None:
        prefix = dom.lane(self.turn_id, lane)
        cards = [
            presenters.card(
                prefix, step, position, name=call.name, call_id=call.id, arguments=call.arguments, status="calling"
            )
            for position, call in enumerate(calls)
        ]
        self.live.step(step, lane).cards = cards
        await self.flush(presenters.cards_fragment(prefix, step, cards, self.live))

    async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult, lane: str = "") -> None:
        data = result.data
        status = "cancelled" if result.cancelled else "error" if result.is_error else "success"
        delegation = data.get("delegation")
        cards = self.live.step(step, lane).cards
        shown = cards[position].get("delegation") if position < len(cards) else None
        if delegation is None and shown:
            # Stop ended the delegation before it could report: its card says it was stopped.
            delegation = presenters.delegation(
                shown["agent"],
                shown["name"],
                shown["lane"],
                task=shown["task"],
                context=shown["context"],
                state="stopped",
            )
        card = presenters.card(
            dom.lane(self.turn_id, lane),
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
            delegation=delegation,
            cached_at=data.get("cached_at"),
        )
        self.live.step(step, lane).cards[position] = card
        self._progress_sent.pop((lane, step, position), None)
        await db(turn_store.save_tool_result)(self.chat_id, self.turn_id, step, position, call.id, result, lane)
        html = presenters.card_fragment(card, self.live)
        known = {s["n"] for s in self.live.sources}
        new = [s for s in data.get("sources") or [] if s["n"] not in known]
        if new:
            self.live.sources = sorted([*self.live.sources, *new], key=lambda s: s["n"])
            html += presenters.sources_fragment(self.live.id, self.live.sources)
        await self.flush(html)

    async def tool_progress(self, step: int, position: int, text: str, percent: float | None, lane: str = "") -> None:
        """A running tool's report; pushed at most every PROGRESS_INTERVAL_S per card."""
        cards = self.live.step(step, lane).cards
        if position >= len(cards) or cards[position]["status"] != "calling":
            return  # the tool already finished; a late report must not undo that
        now = time.monotonic()
        last = self._progress_sent.get((lane, step, position), 0.0)
        if now - last < PROGRESS_INTERVAL_S and (percent or 0) < 100:
            return
        self._progress_sent[(lane, step, position)] = now
        await self._redraw_card(step, position, lane, status="calling", progress_text=text, progress_percent=percent)

    async def tool_partial(self, step: int, position: int, result: Any, lane: str = "") -> None:
        """A running tool's result so far (code's output); pushed at most every
        PROGRESS_INTERVAL_S per card, like progress."""
        cards = self.live.step(step, lane).cards
        if position >= len(cards) or cards[position]["status"] != "calling":
            return
        now = time.monotonic()
        if now - self._progress_sent.get((lane, step, position), 0.0) < PROGRESS_INTERVAL_S:
            return
        self._progress_sent[(lane, step, position)] = now
        await self._redraw_card(step, position, lane, status="calling", result=result)

    async def question_needed(self, step: int, position: int, question: dict[str, Any], lane: str = "") -> None:
        """A call waits for the user's answer (an approval, a server's question): its card shows
        the question (`presenters.question`)."""
        await self._redraw_card(step, position, lane, status="waiting", question=question)

    async def question_answered(self, step: int, position: int, lane: str = "") -> None:
        """Answered: the call runs (on), and its card says so."""
        await self._redraw_card(step, position, lane, status="calling")

    async def _redraw_card(self, step: int, position: int, lane: str, *, status: str = "", **shown: Any) -> None:
        """The card at (lane, step, position), same call, in a new state (`status`, else the
        one it has) showing `shown` (progress, a question, a delegation)."""
        cards = self.live.step(step, lane).cards
        if position >= len(cards):
            return
        old = cards[position]
        card = presenters.card(
            dom.lane(self.turn_id, lane),
            step,
            position,
            name=old["name"],
            call_id=old["call_id"],
            arguments=old["arguments"],
            status=status or old["status"],
            **shown,
        )
        cards[position] = card
        await self.flush(presenters.card_fragment(card, self.live))

    async def system_message(self, step: int, content: str, lane: str = "") -> None:
        await db(turn_store.save_system)(self.chat_id, self.turn_id, step, content, lane)

    async def notice(self, kind: str, text: str, lane: str = "") -> None:
        if lane:
            return  # a subagent's notices (its own tool limit…) are its card's business, not the turn's
        if kind == "summary":
            # The running summary the model now reads instead of the earlier messages: shown
            # as a marker the reader can open (chat/_turn_state.html).
            self.live.notices.append({"summary": redact(text)})
        else:
            self.live.notices.append(redact(text))
        await self.flush(presenters.turn_state_fragment(self.live))

    # --- delegation ---------------------------------------------------------------------------
    def lane(self, lane: str) -> LaneSink:
        """The sink a subagent working in `lane` reports to: its events land in its card."""
        return LaneSink(self, lane)

    async def delegation_changed(self, lane: str, step: int, position: int, delegation: dict[str, Any]) -> None:
        """The delegation card at (lane, step, position) shows a new state (started, finished…)."""
        await self._redraw_card(step, position, lane, delegation=delegation)

    async def finish(self, outcome: Outcome, *, interrupted: bool = False) -> None:
        """Closes the turn with its outcome; `interrupted`: a stop that came from the worker
        shutting down, not from the reader, ends the turn as interrupted (its text is kept)."""
        status = FINAL_STATUS[outcome.status]
        # Provider errors can quote a credential back: redacted before the database, Redis or a page.
        error = redact(outcome.error)
        error_kind = outcome.error_kind
        if interrupted and status == Turn.Status.CANCELLED:
            status, error, error_kind = Turn.Status.INTERRUPTED, turn_store.INTERRUPTED_ERROR, "interrupted"
        # The turn's usage counts its subagents' model calls too.
        tokens = {
            "prompt_tokens": outcome.usage.prompt_tokens + self.subagent_usage.prompt_tokens,
            "completion_tokens": outcome.usage.completion_tokens + self.subagent_usage.completion_tokens,
            "cached_tokens": outcome.usage.cached_tokens + self.subagent_usage.cached_tokens,
        }
        self.live.finish(str(status), error=error, finish_reason=outcome.finish_reason, usage=tokens)
        spans.agent_finished(str(status), error_kind=error_kind, **tokens)
        await self.checkpoints.done()
        closed = await db(turn_store.finish)(
            self.turn,
            status,
            iterations=outcome.iterations,
            error=error,
            error_kind=error_kind,
            notices=self.live.notices,
            first_token_at=self.first_token_at,
            **tokens,
        )
        if not closed:
            # Someone closed the turn first (the reaper took this worker for dead): that end
            # stands, and the page shows it.
            log.warning("Turn %s was closed before its worker finished it", self.turn_id)
            self.live.finish(str(Turn.Status.INTERRUPTED), error=turn_store.INTERRUPTED_ERROR, usage=tokens)
        else:
            metrics.TURNS_FINISHED.labels(OUTCOME_LABEL[status]).inc()
        log.info(
            "Turn finished: %s after %d model calls, %d tokens",
            self.live.status,
            outcome.iterations,
            tokens["prompt_tokens"] + tokens["completion_tokens"],
        )
        await self.flush(presenters.turn_state_fragment(self.live))


class LaneSink:
    """A subagent's EventSink: the same sink, its events addressed to the subagent's lane."""

    def __init__(self, sink: TurnSink, lane: str) -> None:
        self.sink, self.lane_id = sink, lane

    async def step_started(self, step: int) -> None:
        await self.sink.step_started(step, self.lane_id)

    async def text(self, step: int, delta: str) -> None:
        await self.sink.text(step, delta, self.lane_id)

    async def tool_call_opened(self, step: int, position: int, call_id: str, name: str) -> None:
        await self.sink.tool_call_opened(step, position, call_id, name, self.lane_id)

    async def tool_arguments(self, step: int, position: int, text: str) -> None:
        await self.sink.tool_arguments(step, position, text, self.lane_id)

    async def assistant_message(self, step: int, message: AssistantMessage, status: str) -> None:
        await self.sink.assistant_message(step, message, status, self.lane_id)

    async def tools_started(self, step: int, calls: list[ToolCall]) -> None:
        await self.sink.tools_started(step, calls, self.lane_id)

    async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult) -> None:
        await self.sink.tool_finished(step, position, call, result, self.lane_id)

    async def tool_progress(self, step: int, position: int, text: str, percent: float | None) -> None:
        await self.sink.tool_progress(step, position, text, percent, self.lane_id)

    async def system_message(self, step: int, content: str) -> None:
        await self.sink.system_message(step, content, self.lane_id)

    async def notice(self, kind: str, text: str) -> None:
        await self.sink.notice(kind, text, self.lane_id)

    async def steered(self, step: int, texts: list[str]) -> None:
        await self.sink.steered(step, texts, self.lane_id)
