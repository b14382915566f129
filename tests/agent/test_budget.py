"""The loop's budget check (agent/budget.py): reserved before each model call, settled with
the provider's usage after it; a call over budget ends the turn with the budget's message and
keeps what was streamed before."""

from __future__ import annotations

from typing import Any

from agent.budget import OverBudget
from agent.types import Usage

from .helpers import USER, Script, Tools, call_chunk, finish, make_agent, text_chunk


class OneCallBudget:
    """Allows `calls` model calls, then refuses; records every reservation and settlement."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.events: list[Any] = []

    async def reserve(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        if self.calls == 0:
            self.events.append("refused")
            raise OverBudget("Your monthly budget is used up.")
        self.calls -= 1
        self.events.append(("reserved", len(messages)))
        return len(self.events)

    async def settle(self, reservation: Any, usage: Usage) -> None:
        self.events.append(("settled", reservation, usage.total))


async def test_a_call_over_budget_ends_the_turn_and_keeps_what_came_before() -> None:
    async def lookup() -> str:
        return "found"

    script = Script(
        [text_chunk("Let me look."), call_chunk(0, id="a", name="lookup", args=""), finish("tool_calls")],
        [text_chunk("Never asked for."), finish()],
    )
    agent, sink = make_agent(script, Tools(lookup=lookup))
    budget = OneCallBudget(calls=1)
    agent.budget = budget

    outcome = await agent.run(USER)

    assert (outcome.status, outcome.error, outcome.error_kind) == (
        "failed",
        "Your monthly budget is used up.",
        "budget",
    )
    assert len(script.calls) == 1  # the second call was never made
    assert sink.of("assistant")[0][3] == "Let me look."
    assert [e[0] if isinstance(e, tuple) else e for e in budget.events] == ["reserved", "settled", "refused"]
    assert budget.events[1] == ("settled", 1, outcome.usage.total) and outcome.usage.total > 0


async def test_without_a_budget_nothing_is_checked() -> None:
    script = Script([text_chunk("Hi"), finish()])
    agent, _ = make_agent(script, Tools())
    assert agent.budget is None
    assert (await agent.run(USER)).status == "completed"


async def test_the_reservation_is_for_the_request_as_fitted_not_the_whole_transcript() -> None:
    """A long chat is fitted to its model before each call: the budget reserves what is sent
    (else a chat longer than its model's window would reserve, and be refused, for text that
    is never sent)."""
    from agent.context import Fitted

    class LastMessageOnly:
        async def fit(self, messages: list[dict[str, Any]], tools: Any, limit: Any = None) -> Fitted:
            return Fitted(messages=messages[-1:])

    script = Script([text_chunk("Hi"), finish()])
    agent, _ = make_agent(script, Tools())
    agent.fitter = LastMessageOnly()  # type: ignore[assignment]
    budget = OneCallBudget(calls=1)
    agent.budget = budget
    history = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"} for n in range(9)]

    outcome = await agent.run(history)

    assert outcome.status == "completed"
    assert budget.events[0] == ("reserved", 1)
    assert len(script.calls[0]["messages"]) == 1
