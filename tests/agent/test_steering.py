"""Steering (agent/control.py's Inbox): the person's guidance enters the transcript before the
next model call, as their message, and an answer that would end goes on when guidance came."""

from __future__ import annotations

from agent.loop import Agent

from .helpers import USER, Script, Tools, call_chunk, finish, make_agent, text_chunk


class ListInbox:
    """Guidance arriving at chosen looks: `arrivals[n]` is what the n-th look finds."""

    def __init__(self, *arrivals: list[str]) -> None:
        self.arrivals = list(arrivals)
        self.looks: list[int] = []

    async def take(self, step: int) -> list[str]:
        self.looks.append(step)
        return self.arrivals.pop(0) if self.arrivals else []


def _with_inbox(agent: Agent, inbox: ListInbox) -> Agent:
    agent.inbox = inbox
    return agent


async def test_guidance_is_read_after_tool_results_before_the_next_model_call() -> None:
    async def lookup() -> dict[str, str]:
        return {"found": "x"}

    script = Script(
        [call_chunk(0, id="a", name="lookup", args="{}"), finish("tool_calls")],
        [text_chunk("Short answer."), finish()],
    )
    agent, sink = make_agent(script, Tools(lookup=lookup))
    inbox = ListInbox([], ["Keep it short"])
    outcome = await _with_inbox(agent, inbox).run(USER)

    assert outcome.status == "completed"
    second = script.calls[1]["messages"]
    # After the tool's result, the person's words: the model reads them on this call.
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1] == {"role": "user", "content": "Keep it short"}
    assert sink.of("steered") == [("steered", 1, ["Keep it short"])]
    # The steer is recorded before the step that reads it starts.
    kinds = [e[0] for e in sink.events]
    assert kinds.index("steered") < sink.events.index(("step", 1))


async def test_guidance_sent_during_the_last_answer_makes_the_agent_go_on() -> None:
    script = Script([text_chunk("First take."), finish()], [text_chunk("Following it."), finish()])
    agent, sink = make_agent(script, Tools())
    inbox = ListInbox([], ["Mention penguins"])
    outcome = await _with_inbox(agent, inbox).run(USER)

    assert outcome.status == "completed"
    assert len(script.calls) == 2
    assert script.calls[1]["messages"][-2:] == [
        {"role": "assistant", "content": "First take."},
        {"role": "user", "content": "Mention penguins"},
    ]
    assert sink.of("steered") == [("steered", 1, ["Mention penguins"])]
    assert agent.messages[-1] == {"role": "assistant", "content": "Following it."}


async def test_several_pieces_of_guidance_keep_their_order() -> None:
    script = Script([text_chunk("ok"), finish()])
    agent, _ = make_agent(script, Tools())
    outcome = await _with_inbox(agent, ListInbox(["one", "two", "three"])).run(USER)

    assert outcome.status == "completed"
    assert [m["content"] for m in script.calls[0]["messages"][-3:]] == ["one", "two", "three"]


async def test_without_an_inbox_nothing_changes() -> None:
    script = Script([text_chunk("ok"), finish()])
    agent, sink = make_agent(script, Tools())
    await agent.run(USER)
    assert sink.of("steered") == []
    assert len(script.calls) == 1


async def test_no_guidance_is_read_once_stopped() -> None:
    script = Script([text_chunk("ok"), finish()])
    agent, _ = make_agent(script, Tools())
    inbox = ListInbox(["late"])
    agent.cancel.set()
    outcome = await _with_inbox(agent, inbox).run(USER)
    assert outcome.status == "cancelled"
    assert inbox.looks == []
