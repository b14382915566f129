"""Running a `delegate_to_<agent>` call: a subagent with its own instructions, tools and limits,
whose text streams into the delegation card and whose answer goes back to the supervisor.

The subagent is the same agent loop with a `LaneSink`: its steps, text and tool cards land in
the card (its lane is the path of the call, e.g. "0-1"), its messages and tool executions are
stored with that lane, and its token usage counts in the turn's. It shares the turn's Stop, so
Stop ends it and its tools like the rest of the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.utils import timezone

from agent import spans
from agent.budget import Budget
from agent.catalogue import ToolBudget
from agent.loop import Agent, CancelToken, Model, Outcome
from agent.types import ToolCall, ToolResult
from chat import presenters
from chat.agents import AgentSpec
from chat.agents.base import MAX_CONTEXT_LENGTH, MAX_TASK_LENGTH
from chat.selection import AGENTS
from core.redact import redact
from memory import prompt as memory_prompt
from toolsets.sources import SourceBook

from . import turn_store
from .asking import Asking
from .loop import db
from .prompts import system_prompt
from .streaming import TurnSink
from .tools import ChatToolBox

# How long a stopped subagent gets to record what it had before its task is cancelled.
STOP_GRACE_S = 5.0
# The subagent's model, and the turn's budget check priced for that model (None: no budget).
ModelFor = Callable[[AgentSpec], Awaitable[tuple[Model, Budget | None]]]


class Delegator:
    def __init__(
        self,
        *,
        sink: TurnSink,
        cancel: CancelToken,
        model_for: ModelFor,
        user_id: int,
        selection: dict[str, list[str]],
        chat_limit: int,
        max_depth: int,
        sources: SourceBook,
        depth: int = 0,
        lane: str = "",
        tool_budget: ToolBudget | None = None,
    ) -> None:
        self.sink = sink
        self.tool_budget = tool_budget
        self.cancel = cancel
        self.model_for = model_for
        self.user_id = user_id
        self.selection = selection
        self.chat_limit = chat_limit
        self.max_depth = max_depth
        self.depth = depth
        self.lane = lane  # where the supervisor making these calls works ("" for the turn itself)
        self.sources = sources

    async def run(self, agent: AgentSpec, call: ToolCall, step: int, position: int) -> ToolResult:
        task, context, problem = _arguments(call)
        if problem:
            message = f"Error (validation_error): {problem}"
            return ToolResult(
                call.id, message, is_error=True, data={"error_message": problem, "error_type": "validation_error"}
            )
        lane = f"{self.lane}/{step}-{position}" if self.lane else f"{step}-{position}"
        info = presenters.delegation(agent.id, agent.name, lane, task=task, context=context)
        started = time.monotonic()
        record_id = await db(turn_store.open_delegation)(
            self.user_id, self.sink.turn_id, self.lane, step, position, agent.id, call, info
        )
        await self.sink.delegation_changed(self.lane, step, position, info)
        work = asyncio.ensure_future(self._work(agent, lane, task, context))
        try:
            outcome, text = await asyncio.shield(work)
        except asyncio.CancelledError:
            # Stop: the shared token is set, so the subagent is stopping on its own; give it a
            # moment to keep its partial answer, then close its card as stopped.
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(work, STOP_GRACE_S)
            if not work.done():
                work.cancel()
            stopped = {
                **info,
                **presenters.delegation(agent.id, agent.name, lane, task=task, context=context, state="stopped"),
            }
            await asyncio.shield(db(turn_store.close_delegation)(record_id, "cancelled", stopped, "Stopped", started))
            raise
        except Exception as exc:  # a bug in the subagent's run must cost this call, not the turn
            outcome, text = Outcome("failed", 0, error=f"{type(exc).__name__}: {exc}", error_kind="internal"), ""
        state = {"completed": "done", "cancelled": "stopped"}.get(outcome.status, "failed")
        final = presenters.delegation(agent.id, agent.name, lane, task=task, context=context, state=state, result=text)
        status = {"done": "success", "stopped": "cancelled"}.get(state, "error")
        error = redact(outcome.error) if state == "failed" else ""
        duration = await db(turn_store.close_delegation)(record_id, status, final, error, started)
        await self.sink.delegation_changed(self.lane, step, position, final)
        data: dict[str, Any] = {"delegation": final, "execution_id": record_id, "duration_ms": duration}
        if state == "failed":
            data.update(error_message=f"{agent.name} could not finish: {error}", error_type="execution_error")
            return ToolResult(call.id, f"Error (execution_error): {data['error_message']}", is_error=True, data=data)
        if state == "stopped":
            return ToolResult(call.id, "Error: stopped by the user before the agent finished.", True, True, data)
        return ToolResult(call.id, text or f"{agent.name} finished without an answer.", data=data)

    async def _work(self, agent: AgentSpec, lane: str, task: str, context: str) -> tuple[Outcome, str]:
        sink = self.sink
        child = None
        if self.depth + 1 < self.max_depth:
            child = Delegator(
                sink=sink,
                cancel=self.cancel,
                model_for=self.model_for,
                user_id=self.user_id,
                selection=self.selection,
                chat_limit=self.chat_limit,
                max_depth=self.max_depth,
                sources=self.sources,
                depth=self.depth + 1,
                lane=lane,
                tool_budget=self.tool_budget,
            )

        async def progress(step: int, position: int, text: str, percent: float | None) -> None:
            await sink.tool_progress(step, position, text, percent, lane)

        toolbox = ChatToolBox(
            user_id=self.user_id,
            turn_id=sink.turn_id,
            chat_id=sink.chat_id,
            selection=self._selection_for(agent, delegating=child is not None),
            on_progress=progress,
            asking=Asking(sink, lane),
            delegator=child,
            lane=lane,
            sources=self.sources,
            scope=agent.scope,
        )
        await db(toolbox.prepare)()
        # Subagents spend from the turn's budgets, each call priced with the subagent's own model.
        model, budget = await self.model_for(agent)
        brief = task + (f"\n\nContext from the conversation:\n{context}" if context else "")
        # The owner's memories reach a subagent as they reach the turn (a stated language or format
        # holds for its part of the answer too), chosen against its brief and fitted to its model.
        memories = await db(memory_prompt.for_turn)(self.user_id, brief, getattr(model, "context_window", None))
        messages = [
            {"role": "system", "content": f"{agent.instructions}\n\n{system_prompt(timezone.now())}{memories}"},
            {"role": "user", "content": brief},
        ]
        await db(turn_store.save_subagent_prompt)(sink.chat_id, sink.turn_id, lane, messages)
        # A subagent fits its own context, to its own model: old results shortened (it can read
        # them back), long texts cut; its conversation lives only for this call, so no summary.
        loop = Agent(
            model,
            toolbox,
            sink.lane(lane),
            self.cancel,
            max_iterations=min(agent.max_iterations, self.chat_limit),
            fitter=model.fitter() if hasattr(model, "fitter") else None,
            tool_budget=self.tool_budget,
            budget=budget,
        )
        # The run's model and tool calls nest under its own agent span, under the supervisor's.
        with spans.agent(agent.name, turn_id=sink.turn_id, depth=self.depth + 1):
            outcome = await loop.run(messages)
            spans.agent_finished(
                outcome.status,
                error_kind=outcome.error_kind or "",
                prompt_tokens=outcome.usage.prompt_tokens,
                completion_tokens=outcome.usage.completion_tokens,
            )
        sink.subagent_usage.add(outcome.usage)
        answers = [m for m in loop.messages if m.get("role") == "assistant" and m.get("content")]
        return outcome, str(answers[-1]["content"]) if answers else ""

    def _selection_for(self, agent: AgentSpec, *, delegating: bool) -> dict[str, list[str]]:
        """The subagent's tools: its agent's toolsets (every tool of each), or for a general
        agent the chat's own selection; agents only while it may delegate further."""
        from toolsets.registry import all_toolsets

        if agent.toolsets is None:
            chosen = {k: list(v) for k, v in self.selection.items() if k != AGENTS}
        else:
            known = all_toolsets()
            chosen = {t: [tool.name for tool in known[t].tools] for t in agent.toolsets if t in known}
        if delegating and self.selection.get(AGENTS):
            chosen[AGENTS] = list(self.selection[AGENTS])
        return chosen


def _arguments(call: ToolCall) -> tuple[str, str, str]:
    """(task, context, problem): the supervisor's arguments, or what is wrong with them."""
    try:
        arguments = call.parsed_arguments()
    except ValueError as exc:
        return "", "", str(exc)
    task, context = arguments.get("task"), arguments.get("context", "")
    if not isinstance(task, str) or not task.strip():
        return "", "", "task: a non-empty string is required"
    if not isinstance(context, str):
        return "", "", "context: must be a string"
    if len(task) > MAX_TASK_LENGTH or len(context) > MAX_CONTEXT_LENGTH:
        return "", "", f"task and context are limited to {MAX_TASK_LENGTH} and {MAX_CONTEXT_LENGTH} characters"
    unknown = set(arguments) - {"task", "context"}
    if unknown:
        return "", "", f"unknown argument(s): {', '.join(sorted(unknown))}"
    return task.strip(), context.strip(), ""
