"""The agent loop: run() → step() → query(), until the model answers without tools.

Plain Python. The host (the Celery task) supplies a model, a toolbox and an event sink; the loop
owns the transcript and the rules:

- every tool call of a step runs in parallel; a failing call becomes an "Error: …" result for
  that call only, and the model sees it;
- after `max_iterations` tool-using steps the model is told to answer without tools, and the
  user is shown a notice;
- Stop is cooperative: checked before each model call, between chunks and while tools run; the
  partial answer is kept and every started tool call still gets a result, so the stored
  transcript stays valid for the provider;
- the transcript stays valid for any provider (see `transcript`): every tool call gets an id
  unique in the conversation and JSON-object arguments; the raw arguments still go to the tool,
  whose validation error the model then reads;
- an answer the provider cut (`finish_reason` "length") or filtered ("content_filter") ends the
  turn with a notice the reader sees;
- the person's guidance sent mid-answer (`Inbox`) is read before each call and before the end;
- every request is fitted to the model's context window (`context`: the transcript itself stays
  whole), and a provider's context-length error gets exactly one fitted retry; the loop's own
  tools, `read_tool_result` and (past the tool budget, see `catalogue`) `find_tools`, run here.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from .budget import Budget, OverBudget
from .catalogue import FIND_SPEC, FIND_TOOL, ToolBudget, catalogue, find, name_of
from .context import READ_SPEC, READ_TOOL, Fitted, Fitter, read_back, retry_limit
from .control import CancelToken as CancelToken  # CancelToken: the host imports it from here
from .control import Inbox
from .exceptions import Cancelled, Finished, ProviderError
from .ports import EventSink as EventSink  # the host imports these from here
from .ports import Model as Model
from .ports import ToolBox as ToolBox
from .transcript import CallIds, call_ids, canonical
from .types import (
    AssistantMessage,
    Completed,
    TextDelta,
    ToolArguments,
    ToolCall,
    ToolCallOpened,
    ToolResult,
    Usage,
)

LIMIT_MESSAGE = (
    "You have used the maximum number of tool calls for this turn. Answer the user now, using "
    "only the information you already have. Do not call any tools."
)
LIMIT_NOTICE = "Tool limit reached ({limit} steps): the assistant answered with what it had."
CANCELLED_RESULT = "Error: cancelled by the user before this tool finished."
RECORD_FAILED = "the tool ran, but its result could not be recorded"
# Shown to the reader when the last answer of a turn did not end on its own.
FINISH_NOTICES = {
    "length": "The answer was cut by the token limit.",
    "content_filter": "The answer was stopped by the provider's content filter.",
}
EMPTY_NOTICE = "The model ended its answer without writing anything."
# What the reader is told when a request was fitted to the model's context (once a turn each).
COMPACTED_NOTICE = "Older tool results were shortened for the model to fit its context; it can read them again."
REFERRED_NOTICE = "Files and images read earlier were referred to, not sent again, to fit the model's context."
CUT_NOTICE = "Some long texts were cut to fit the model's context."
RETRY_NOTICE = "The provider found the conversation too long for the model: it was fitted and sent again."

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass
class Outcome:
    status: Literal["completed", "cancelled", "failed"]
    iterations: int
    usage: Usage = field(default_factory=Usage)
    error: str = ""
    error_kind: str = ""
    # Why the last model call ended ("stop", "length", "content_filter"…), when it ended.
    finish_reason: str | None = None


class Agent:
    def __init__(
        self,
        model: Model,
        tools: ToolBox,
        sink: EventSink,
        cancel: CancelToken,
        max_iterations: int = 5,
        fitter: Fitter | None = None,
        tool_budget: ToolBudget | None = None,
        budget: Budget | None = None,
        inbox: Inbox | None = None,
    ) -> None:
        self.model = model
        self.inbox = inbox  # the person's guidance mid-answer (None: nobody steers this loop)
        self.budget = budget  # checked before each model call (None: no limit on spending)
        self.tools = tools
        self.sink = sink
        self.cancel = cancel
        self.max_iterations = max(0, max_iterations)
        self.messages: list[dict[str, Any]] = []
        self.iterations = 0
        self.step_index = 0
        self.usage = Usage()
        self.finish_reason: str | None = None
        self._limit_sent = False
        self._ids = CallIds()
        # Fits each request to the model's context window; None: requests go out whole.
        self.fitter = fitter
        self._read_offered = False  # read_tool_result stays offered once it has been
        self._told: set[str] = set()  # fitting notices already given this turn
        # Past this budget the model gets a catalogue and find_tools instead of every definition.
        self.tool_budget = tool_budget
        self._catalogue = ""  # the catalogue added to the system prompt ("" when not needed)
        self._all_specs: list[dict[str, Any]] = []
        self._found: set[str] = set()  # definitions find_tools brought in, offered for the turn

    async def run(self, messages: list[dict[str, Any]]) -> Outcome:
        self.messages = canonical(list(messages))
        self._ids = CallIds(call_ids(self.messages))
        try:
            while True:
                await self.step()
        except Finished:
            return Outcome("completed", self.iterations, self.usage, finish_reason=self.finish_reason)
        except Cancelled:
            return Outcome("cancelled", self.iterations, self.usage, finish_reason=self.finish_reason)
        except ProviderError as exc:
            return Outcome(
                "failed", self.iterations, self.usage, error=exc.message, error_kind=exc.kind, finish_reason=None
            )
        except OverBudget as exc:
            return Outcome("failed", self.iterations, self.usage, error=exc.message, error_kind="budget")

    async def step(self) -> None:
        if self.cancel.is_set():
            raise Cancelled
        await self._guidance()
        specs = self._offered(self.tools.specs())
        tools: list[dict[str, Any]] | None = specs or None
        if tools and self.iterations >= self.max_iterations:
            tools = None
            if not self._limit_sent:
                self._limit_sent = True
                self.messages.append({"role": "system", "content": LIMIT_MESSAGE})
                await self.sink.system_message(self.step_index, LIMIT_MESSAGE)
                await self.sink.notice("limit", LIMIT_NOTICE.format(limit=self.max_iterations))
        # Fitted before the step is shown: a summary being written is part of getting ready.
        request, tools = await self.fit(tools)
        step = self.step_index
        self.step_index += 1
        await self.sink.step_started(step)
        message = await self.query(step, tools, request)
        if message.tool_calls and tools is None:
            # Some providers emit calls even when none were offered; there is nothing to run
            # them with, and an unanswered call would make the transcript invalid.
            message.tool_calls = []
        for call in message.tool_calls:
            # Some servers reuse ids ("call_0" in every step, or for two calls of one step).
            call.id = self._ids.assign(call.id)
        self.finish_reason = message.finish_reason
        self.messages.append(message.to_openai())
        await self.sink.assistant_message(step, message, "complete")
        if not message.tool_calls:
            reason = message.finish_reason or ""
            if reason in FINISH_NOTICES:
                await self.sink.notice(reason, FINISH_NOTICES[reason])
            elif not message.content.strip():
                await self.sink.notice("empty", EMPTY_NOTICE)
            if await self._guidance():
                return  # guidance came while the answer was written: the model reads it and goes on
            raise Finished
        self.iterations += 1
        results = await self.execute(step, message.tool_calls)
        self.messages.extend(result.to_openai() for result in results)
        if any(result.cancelled for result in results):
            raise Cancelled
        # A tool the caller runs itself (the OpenAI-compatible API's client-side tools): the
        # turn ends here and the calls go back to the caller, who sends their results later.
        returned: frozenset[str] = getattr(self.tools, "client_names", frozenset())
        if returned and any(call.name in returned for call in message.tool_calls):
            self.finish_reason = "tool_calls"
            raise Finished

    async def _guidance(self) -> bool:
        """The person's guidance sent since the last look, into the transcript. True if any came."""
        if self.inbox is None or self.cancel.is_set():
            return False
        texts = await self.inbox.take(self.step_index)
        if not texts:
            return False
        self.messages.extend({"role": "user", "content": text} for text in texts)
        await self.sink.steered(self.step_index, texts)
        return True

    async def fit(
        self, tools: list[dict[str, Any]] | None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """The request for the next model call (messages, tools): the transcript fitted to the
        model's context, with the read-back tool once an old result has been shortened."""
        base = self._with_catalogue(self.messages)
        if self.fitter is None:
            return base, tools
        # The read-back tool is counted in whenever it could be offered (not past the tool limit).
        may_read = tools is not None or not self._limit_sent
        with_read = [*(tools or []), READ_SPEC] if may_read else tools
        fitted = await self.fitter.fit(base, with_read, limit=limit)
        self.usage.add(fitted.usage)
        await self._tell(fitted)
        if may_read and (fitted.compacted or self._read_offered):
            self._read_offered = True
            return fitted.messages, with_read
        return fitted.messages, tools

    def _offered(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The definitions the next call offers: all of them within the tool budget; past it,
        find_tools and what it found (in the toolbox's order, so the list is stable)."""
        if self.tool_budget is None or not specs:
            return specs
        if not self._catalogue:
            tokens = self.fitter.count_tools(specs) if self.fitter else len(json.dumps(specs)) // 4
            if not self.tool_budget.exceeded(specs, tokens):
                return specs
            self._catalogue = catalogue(specs)
        self._all_specs = specs
        return [FIND_SPEC, *(spec for spec in specs if name_of(spec) in self._found)]

    def _with_catalogue(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The catalogue joins the system prompt (a copy: the transcript keeps neither), so
        the request starts with the same text on every call of the turn."""
        if not self._catalogue:
            return messages
        if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
            first = {**messages[0], "content": f"{messages[0]['content']}\n\n{self._catalogue}"}
            return [first, *messages[1:]]
        return [{"role": "system", "content": self._catalogue}, *messages]

    async def _tell(self, fitted: Fitted) -> None:
        if fitted.summary_made:
            # Shown where a summary was written; the answers after it that reuse it say nothing.
            await self.sink.notice("summary", fitted.summary)
        for kind, done, text in (
            ("compacted", fitted.compacted, COMPACTED_NOTICE),
            ("referred", fitted.referred, REFERRED_NOTICE),
            ("cut", fitted.cut, CUT_NOTICE),
        ):
            if done and kind not in self._told:
                self._told.add(kind)
                await self.sink.notice(kind, text)

    async def query(
        self, step: int, tools: list[dict[str, Any]] | None, request: list[dict[str, Any]] | None = None
    ) -> AssistantMessage:
        async def consume(messages: list[dict[str, Any]], offered: list[dict[str, Any]] | None) -> AssistantMessage:
            stream = self.model.stream(messages, offered)
            try:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        await self.sink.text(step, event.text)
                    elif isinstance(event, ToolCallOpened):
                        await self.sink.tool_call_opened(step, event.position, event.id, event.name)
                    elif isinstance(event, ToolArguments):
                        await self.sink.tool_arguments(step, event.position, event.text)
                    elif isinstance(event, Completed):
                        return event.message
            finally:
                await _aclose(stream)
            raise ProviderError("The model provider ended the response without finishing it.", kind="incomplete")

        # Raises OverBudget before anything is asked of the provider. What is reserved is the
        # request as sent (fitted to the model's context), not the whole transcript.
        reserved = request if request is not None else self.messages
        reservation = await self.budget.reserve(reserved, tools) if self.budget is not None else None
        # Every call is paid for, however it ends, and settled exactly once (in `finally`): a
        # finished call with its usage; a stopped, failed or broken one with what it cost up to
        # there, which the seam counts from what was received (`partial.usage`).
        spent: Usage | None = None
        try:
            try:
                sent = request if request is not None else self.messages
                message = await self._unless_cancelled(consume(sent, tools))
            except ProviderError as exc:
                # The provider counts differently, or the budget is unknown: one more try,
                # fitted to the limit its error states, else to a share of what was refused.
                # Nothing has reached the reader yet (and a refused request costs nothing).
                if exc.kind != "context_window" or self.fitter is None or self.model.partial.content:
                    raise
                refused = self.fitter.total(sent, tools)
                limit = retry_limit(str(exc.__cause__ or exc), refused, self.fitter.budget.reserve)
                await self.sink.notice("retry", RETRY_NOTICE)
                messages, retry_tools = await self.fit(tools, limit=limit)
                message = await self._unless_cancelled(consume(messages, retry_tools))
            spent = message.usage
        except Cancelled:
            partial = self._cut_short()
            spent = partial.usage
            self.messages.append(partial.to_openai())
            await self.sink.assistant_message(step, partial, "stopped")
            raise
        except ProviderError:
            partial = self._cut_short()
            spent = partial.usage
            if partial.content:
                self.messages.append(partial.to_openai())
            await self.sink.assistant_message(step, partial, "failed")
            raise
        finally:
            # Anything else (the retry's summary over budget, the task cancelled, a bug) is
            # charged what the call used too, so the reservation does not hold the budget
            # until the period ends and nothing spent goes unpaid.
            await self._settle(reservation, spent if spent is not None else self.model.partial.usage)
        self.usage.add(message.usage)
        return message

    def _cut_short(self) -> AssistantMessage:
        """The answer of a call that ended early, with what it cost, counted in the turn."""
        partial = self.model.partial
        cut = AssistantMessage(content=partial.content, usage=partial.usage)
        self.usage.add(cut.usage)
        return cut

    async def _settle(self, reservation: Any, usage: Usage) -> None:
        if self.budget is not None and reservation is not None:
            await self.budget.settle(reservation, usage)

    async def execute(self, step: int, calls: list[ToolCall]) -> list[ToolResult]:
        results: list[ToolResult | None] = [None] * len(calls)
        await self.sink.tools_started(step, calls)

        async def run_one(position: int, call: ToolCall) -> None:
            try:
                if call.name == READ_TOOL and self.fitter is not None:
                    result = self._read_back(call)
                elif call.name == FIND_TOOL and self._catalogue:
                    result = self._find(call)
                else:
                    result = await self.tools.run(call, step, position)
            except Exception as exc:  # a toolbox bug must still end as this call's error result
                result = ToolResult(call.id, f"Error: {type(exc).__name__}: {exc}", is_error=True)
            results[position] = result
            # Shielded: once a result exists it is recorded even if Stop arrives meanwhile.
            try:
                await asyncio.shield(self.sink.tool_finished(step, position, call, result))
            except Exception as exc:
                # Recording the result failed (a result the page or the database cannot take):
                # the call ends as an error the model and the reader both see, never as a card
                # left "calling" and a result only the model saw.
                log.exception("Recording the result of %s failed", call.name)
                failed = ToolResult(call.id, f"Error: {RECORD_FAILED} ({type(exc).__name__})", is_error=True)
                results[position] = failed
                await asyncio.shield(self.sink.tool_finished(step, position, call, failed))

        if not self.cancel.is_set():
            tasks = [asyncio.create_task(run_one(i, call)) for i, call in enumerate(calls)]
            waiter = asyncio.create_task(self.cancel.wait())
            try:
                await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
                pending = {t for t in tasks if not t.done()}
                while pending and not waiter.done():
                    await asyncio.wait([*pending, waiter], return_when=asyncio.FIRST_COMPLETED)
                    pending = {t for t in pending if not t.done()}
            finally:
                waiter.cancel()
                for task in tasks:
                    if not task.done():
                        task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        for position, call in enumerate(calls):
            if results[position] is None:
                result = ToolResult(call.id, CANCELLED_RESULT, is_error=True, cancelled=True)
                results[position] = result
                await self.sink.tool_finished(step, position, call, result)
        return [r for r in results if r is not None]

    def _find(self, call: ToolCall) -> ToolResult:
        try:
            arguments = call.parsed_arguments()
        except ValueError as exc:
            return ToolResult(call.id, f"Error: {exc}", is_error=True)
        found, text = find(self._all_specs, arguments)
        self._found.update(found)
        return _own_result(call, text, text.startswith("Error"))

    def _read_back(self, call: ToolCall) -> ToolResult:
        try:
            arguments = call.parsed_arguments()
        except ValueError as exc:
            return ToolResult(call.id, f"Error: {exc}", is_error=True)
        text, is_error = read_back(self.messages, arguments)
        return _own_result(call, text, is_error)

    async def _unless_cancelled(self, work: Awaitable[T]) -> T:
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(self.cancel.wait())
        try:
            await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
        raise Cancelled


def _own_result(call: ToolCall, text: str, is_error: bool) -> ToolResult:
    """A result of the loop's own tools; its card shows the first line (which result, which
    part; which tools were found), not the whole text the model reads."""
    data: dict[str, Any] = {"arguments": call.arguments}
    if not is_error:
        data["result"] = text.split("\n", 1)[0]
    return ToolResult(call.id, text, is_error=is_error, data=data)


async def _aclose(stream: Any) -> None:
    closer = getattr(stream, "aclose", None)
    if closer is not None:
        await closer()
