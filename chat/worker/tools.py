"""The agent loop's toolbox for one chat (or one subagent): which tools are offered, running them
through the shared executor, and handing `delegate_to_<agent>` calls to the delegator."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from agent import spans
from agent.types import ToolCall, ToolResult
from chat import agents
from chat.agents import AgentSpec
from chat.selection import AGENTS
from core import groups as member_groups
from toolsets import availability, executor, policy
from toolsets.base import Toolset, qualified_name
from toolsets.registry import all_toolsets
from toolsets.sources import SourceBook

from .asking import Asking

# ToolExecution.tool_call_id's length. Ids can be longer (Gemini's carry a signature); the
# record only needs one to show, the transcript keeps the whole id.
TOOL_CALL_ID_LENGTH = 200
CLIENT_RESULT = "Sent to the API caller, which runs this tool itself."


ProgressCallback = Callable[[int, int, str, float | None], Awaitable[None]]
PartialCallback = Callable[[int, int, Any], Awaitable[None]]


class ChatToolBox:
    def __init__(
        self,
        *,
        user_id: int,
        turn_id: int,
        chat_id: int | None = None,
        selection: dict[str, list[str]],
        on_progress: ProgressCallback | None = None,
        on_partial: PartialCallback | None = None,
        delegator: Any = None,
        lane: str = "",
        sources: SourceBook | None = None,
        asking: Asking | None = None,
        client_tools: list[dict[str, Any]] | None = None,
        client: str = "",
        scope: dict[str, Any] | None = None,
    ) -> None:
        self.user_id = user_id
        # What the agent running this toolbox limits its tools to (its knowledge bases).
        self.scope = dict(scope or {})
        self.turn_id = turn_id
        self.chat_id = chat_id
        self.selection = selection or {}
        # Runs delegate_to_<agent> calls (None: this toolbox may not delegate, e.g. past the depth).
        self.delegator = delegator
        # A subagent's toolbox: the path of the delegation call its work belongs to.
        self.lane = lane
        self.agents: dict[str, AgentSpec] = {}  # tool name → agent
        # The turn's numbered sources: one book for the turn and every subagent in it.
        self.sources = sources if sources is not None else SourceBook()
        self._specs: list[dict[str, Any]] = []
        # The names in `_specs`: what a call may name. Anything else is refused where it runs.
        self._offered: set[str] = set()
        # Where a tool's progress reports go: (step, position, text, percent).
        self.on_progress = on_progress
        # Where a running tool's result so far goes: (step, position, result).
        self.on_partial = on_partial
        # Asks the chat's owner during a call (chat.worker.asking): before an "ask" tool runs,
        # and an MCP server's questions. None: nobody can be asked.
        self.asking = asking
        # Selected toolsets that are not usable right now, as "Name (reason)".
        self.skipped: list[str] = []
        # Tools an API caller passed (OpenAI format): offered to the model, never run here; a
        # call to one ends the turn and goes back to the caller (hub/openai.py).
        self.client_tools = list(client_tools or [])
        self.client_names = frozenset(t["function"]["name"] for t in self.client_tools)
        # The program a turn was sent by, for the audit log ("openai: token …", "mcp: …").
        self.client = client
        # (toolset name, instructions) of the offered toolsets that have some, for the prompt.
        self.instructions: list[tuple[str, str]] = []

    def prepare(self, groups: frozenset[int] | None = None, offered: dict[str, bool] | None = None) -> None:
        """Decides, once per turn, which selected tools the model is offered: only those of
        toolsets usable for this user right now (blocking: call from a thread). `groups`: the
        user's, and `offered`: toolsets' `offered_to` answers by id, when the caller has read
        them already (chat/worker/owner_facts.py)."""
        if groups is None:
            groups = member_groups.of_user(self.user_id)  # read once, for the toolsets and the agents
        available = availability.for_user(self.user_id, groups)
        admin_policies = {toolset_id: state.admin_policy for toolset_id, state in available.items()}
        policies = policy.PolicyBook(self.user_id, admin_policies)
        self._specs, self.skipped, self.instructions = [], [], []
        for toolset in all_toolsets().values():
            chosen = set(self.selection.get(toolset.id, []))
            if not chosen:
                continue
            state = available[toolset.id]
            if not state.usable:
                self.skipped.append(f"{toolset.name} ({state.reason})")
                continue
            if not self._offered_to(toolset, offered):
                continue  # nothing to work on (no base, memory off): not worth a notice
            offered_before = len(self._specs)
            for tool in toolset.tools:
                # A tool whose policy is Deny, that is held, or that only an MCP App may call, is
                # never offered.
                if (
                    tool.name in chosen
                    and tool.model_visible
                    and not tool.held
                    and policies.get(toolset, tool).policy != policy.DENY
                ):
                    self._specs.append(
                        {
                            "type": "function",
                            "function": {
                                "name": qualified_name(toolset.id, tool.name),
                                "description": tool.description,
                                "parameters": tool.parameters,
                            },
                        }
                    )
            if toolset.instructions and len(self._specs) > offered_before:
                self.instructions.append((toolset.name, toolset.instructions))
        self._offer_agents(available, groups)
        self._offered = {spec["function"]["name"] for spec in self._specs}
        self._specs.extend(self.client_tools)

    def _offered_to(self, toolset: Toolset, known: dict[str, bool] | None) -> bool:
        if toolset.offered_to is None:
            return True
        if known is not None and toolset.id in known:
            return known[toolset.id]
        return bool(toolset.offered_to(self.user_id))

    def _offer_agents(self, available: dict[str, availability.Availability], groups: frozenset[int]) -> None:
        self.agents = {}
        chosen_agents = self.selection.get("agents") or []
        if self.delegator is None or not chosen_agents:
            return
        for agent_id, agent_state in agents.availability(self.user_id, toolsets=available, groups=groups).items():
            if agent_id not in chosen_agents:
                continue
            if not agent_state.usable:
                self.skipped.append(f"{agent_state.agent.name} ({agent_state.reason})")
                continue
            self.agents[agent_state.agent.tool_name] = agent_state.agent
            self._specs.append(agent_state.agent.spec())

    def specs(self) -> list[dict[str, Any]]:
        return self._specs

    @property
    def offered(self) -> frozenset[str]:
        return frozenset(self._offered)

    def _progress_reporter(self, step: int, position: int) -> Callable[[str, float | None], None]:
        loop = asyncio.get_running_loop()

        def report(text: str, percent: float | None = None) -> None:
            # Sync tools run in a worker thread: hop back onto the turn's event loop.
            if self.on_progress is None:
                return
            callback = self.on_progress
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(callback(step, position, text, percent)))

        return report

    def _partial_reporter(self, step: int, position: int) -> Callable[[Any], None] | None:
        if self.on_partial is None:
            return None
        loop = asyncio.get_running_loop()
        callback = self.on_partial

        def report(result: Any) -> None:
            # From the loop (async tools) or a worker thread (sync ones): either way, scheduled.
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(callback(step, position, result)))

        return report

    async def run(self, call: ToolCall, step: int, position: int) -> ToolResult:
        if call.name in self.client_names:
            return ToolResult(call.id, CLIENT_RESULT, data={"client_tool": True})
        agent = self.agents.get(call.name)
        if agent is not None and self.delegator is not None:
            with spans.delegation_call(call.name, call.id[:TOOL_CALL_ID_LENGTH], AGENTS) as span:
                result: ToolResult = await self.delegator.run(agent, call, step, position)
                spans.call_finished(span, error=result.is_error)
            return result
        # The execution is recorded at its place in the turn, which is how its card finds it
        # again after a reload; the provider's id may be shared by several calls.
        execution = await executor.execute(
            call.name,
            call.arguments,  # as the model sent it: the executor reports what is wrong with it
            user_id=self.user_id,
            tool_call_id=call.id[:TOOL_CALL_ID_LENGTH],
            turn_id=self.turn_id,
            step=step,
            position=position,
            lane=self.lane,
            sources=self.sources,
            progress=self._progress_reporter(step, position),
            partial=self._partial_reporter(step, position),
            chat_id=self.chat_id,
            approve=functools.partial(self.asking.approve, step, position) if self.asking else None,
            elicit=functools.partial(self.asking.elicit, step, position) if self.asking else None,
            offered=self._offered,
            offered_in="given to this agent" if self.lane else "selected for this chat",
            client=self.client,
            scope=self.scope,
        )
        content = execution.model_content(int(settings.TESSERA["TOOL_RESULT_MODEL_LIMIT"]))
        data: dict[str, Any] = {
            "arguments": execution.arguments or call.arguments,
            "duration_ms": execution.duration_ms,
            "execution_id": execution.record_id,
        }
        if execution.sources:
            data["sources"] = list(execution.sources)
        if execution.cached_at is not None:
            data["cached_at"] = execution.cached_at.isoformat()
        if execution.error is None:
            data["result"] = execution.result
        else:
            data["error_message"] = execution.error.full_message
            data["error_type"] = execution.error.type
        return ToolResult(call.id, content, is_error=execution.error is not None, data=data)
