"""The agent loop (agent/loop.py): steps, parallel tools, limits, Stop, ids and notices,
driven by a scripted model through the real LiteLLM seam."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.loop import CANCELLED_RESULT, LIMIT_MESSAGE
from agent.types import ToolCall, ToolResult

from .helpers import USER, RecordingSink, Script, Stream, Tools, call_chunk, finish, make_agent, text_chunk


async def test_plain_answer_streams_text_and_finishes() -> None:
    script = Script([text_chunk("Hello"), text_chunk(" there"), finish()])
    agent, sink = make_agent(script, Tools())
    outcome = await agent.run(USER)
    assert outcome.status == "completed"
    assert [e[2] for e in sink.of("text")] == ["Hello", " there"]
    assert sink.of("assistant") == [("assistant", 0, "complete", "Hello there", [])]
    assert agent.messages[-1] == {"role": "assistant", "content": "Hello there"}
    assert outcome.usage.completion_tokens == 5


async def test_parallel_tool_errors_are_returned_to_model() -> None:
    started: list[str] = []
    both_running = asyncio.Event()

    async def slow_ok(x: int) -> dict[str, int]:
        started.append("ok")
        if len(started) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 2)  # only passes if the calls overlap
        return {"x": x}

    async def broken() -> None:
        started.append("broken")
        if len(started) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 2)
        raise RuntimeError("disk on fire")

    script = Script(
        [
            call_chunk(0, id="a", name="slow_ok", args='{"x":'),
            call_chunk(0, args=" 1}"),
            call_chunk(1, id="b", name="broken", args=""),
            finish("tool_calls"),
        ],
        [text_chunk("Done."), finish()],
    )
    agent, sink = make_agent(script, Tools(slow_ok=slow_ok, broken=broken))
    outcome = await agent.run(USER)
    assert outcome.status == "completed"
    assert sorted(started) == ["broken", "ok"]
    second = script.calls[1]["messages"]
    assert second[-3]["tool_calls"][0]["function"] == {"name": "slow_ok", "arguments": '{"x": 1}'}
    assert second[-3]["tool_calls"][1]["function"] == {"name": "broken", "arguments": "{}"}
    assert second[-2] == {"role": "tool", "tool_call_id": "a", "content": '{"x": 1}'}
    assert second[-1]["tool_call_id"] == "b" and second[-1]["content"] == "Error: disk on fire"
    assert sorted(e[3] for e in sink.of("tool_done")) == [False, True]


async def test_max_iterations_tells_model_to_answer_without_tools() -> None:
    async def ping() -> str:
        return "pong"

    looping = [call_chunk(0, id="c", name="ping", args="{}"), finish("tool_calls")]
    script = Script(looping, list(looping), [text_chunk("Final."), finish()])
    agent, sink = make_agent(script, Tools(ping=ping), max_iterations=2)
    outcome = await agent.run(USER)
    assert outcome.status == "completed"
    assert outcome.iterations == 2
    assert "tools" in script.calls[1] and "tools" not in script.calls[2]
    assert script.calls[2]["messages"][-1] == {"role": "system", "content": LIMIT_MESSAGE}
    assert sink.of("notice")[0][1] == "limit"
    assert sink.of("system")[0][2] == LIMIT_MESSAGE


async def test_cancel_mid_stream_keeps_partial_answer() -> None:
    gate = asyncio.Event()
    stream = Stream([text_chunk("Partial "), text_chunk("answer"), text_chunk(" never sent"), finish()], gate, after=2)
    agent, sink = make_agent(Script(stream), Tools())
    task = asyncio.create_task(agent.run(USER))
    while len(sink.of("text")) < 2:
        await asyncio.sleep(0.01)
    agent.cancel.set()
    outcome = await asyncio.wait_for(task, 2)
    assert outcome.status == "cancelled"
    assert sink.of("assistant") == [("assistant", 0, "stopped", "Partial answer", [])]
    assert agent.messages[-1] == {"role": "assistant", "content": "Partial answer"}
    assert stream.closed


async def test_cancel_mid_tool_gives_every_call_a_result() -> None:
    finished = asyncio.Event()

    async def quick() -> str:
        return "fast"

    async def forever() -> str:
        await asyncio.sleep(3600)
        return "never"

    script = Script(
        [
            call_chunk(0, id="q", name="quick", args="{}"),
            call_chunk(1, id="f", name="forever", args="{}"),
            finish("tool_calls"),
        ],
    )
    agent, sink = make_agent(script, Tools(quick=quick, forever=forever))
    task = asyncio.create_task(agent.run(USER))
    while not sink.of("tool_done"):
        await asyncio.sleep(0.01)
    agent.cancel.set()
    outcome = await asyncio.wait_for(task, 2)
    finished.set()
    assert outcome.status == "cancelled"
    tool_messages = [m for m in agent.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["q", "f"]
    assert tool_messages[1]["content"] == CANCELLED_RESULT
    assert len(script.calls) == 1  # no further model call after Stop


async def test_cancel_before_tools_run_marks_them_cancelled() -> None:
    ran: list[str] = []

    async def side_effect() -> str:
        ran.append("x")
        return "done"

    script = Script([call_chunk(0, id="s", name="side_effect", args="{}"), finish("tool_calls")])
    agent, sink = make_agent(script, Tools(side_effect=side_effect))

    original = sink.tools_started

    async def cancel_then_start(step: int, calls: list[ToolCall]) -> None:
        agent.cancel.set()
        await original(step, calls)

    sink.tools_started = cancel_then_start  # type: ignore[method-assign]
    outcome = await agent.run(USER)
    assert outcome.status == "cancelled"
    assert ran == []
    assert agent.messages[-1]["content"] == CANCELLED_RESULT


async def test_text_before_tool_calls_is_kept_with_the_calls() -> None:
    async def ping() -> str:
        return "pong"

    script = Script(
        [text_chunk("Checking. "), call_chunk(0, id="p", name="ping", args="{}"), finish("tool_calls")],
        [text_chunk("Pong."), finish()],
    )
    agent, _ = make_agent(script, Tools(ping=ping))
    await agent.run(USER)
    first_assistant = script.calls[1]["messages"][-2]
    assert first_assistant["content"] == "Checking. "
    assert first_assistant["tool_calls"][0]["function"]["name"] == "ping"


async def test_calls_with_finish_reason_stop_still_run() -> None:
    async def ping() -> str:
        return "pong"

    script = Script([call_chunk(0, id="p", name="ping", args="{}"), finish("stop")], [text_chunk("ok"), finish()])
    agent, _ = make_agent(script, Tools(ping=ping))
    outcome = await agent.run(USER)
    assert outcome.iterations == 1 and len(script.calls) == 2


async def test_invalid_json_arguments_reach_the_tool_but_never_the_transcript() -> None:
    seen: list[str] = []

    class RawTools(Tools):
        async def run(self, call: ToolCall, step: int, position: int) -> ToolResult:
            seen.append(call.arguments)
            return await super().run(call, step, position)

    async def ping(x: int = 0) -> str:
        return "pong"

    script = Script(
        [call_chunk(0, id="bad", name="ping", args='{"x": 1,'), finish("tool_calls")],
        [text_chunk("Sorry."), finish()],
    )
    agent, _ = make_agent(script, RawTools(ping=ping))
    outcome = await agent.run(USER)
    assert outcome.status == "completed"
    assert seen == ['{"x": 1,']  # the tool (and its validation error) sees what the model sent
    sent = script.calls[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert sent[-1]["tool_call_id"] == "bad" and sent[-1]["content"].startswith("Error")


async def test_duplicate_ids_get_unique_ids_and_distinct_places() -> None:
    async def ping(n: int) -> int:
        return n

    script = Script(
        [
            call_chunk(0, id="call_0", name="ping", args='{"n": 1}'),
            call_chunk(1, id="call_0", name="ping", args='{"n": 2}'),
            finish("tool_calls"),
        ],
        # The next step reuses the id again, as some local servers do in every step.
        [call_chunk(0, id="call_0", name="ping", args='{"n": 3}'), finish("tool_calls")],
        [text_chunk("Done."), finish()],
    )
    tools = Tools(ping=ping)
    agent, _ = make_agent(script, tools)
    assert (await agent.run(USER)).status == "completed"
    # Parallel calls finish in any order; each ran once, at its own place.
    assert sorted(tools.places) == [("ping", 0, 0), ("ping", 0, 1), ("ping", 1, 0)]
    final = script.calls[-1]["messages"]
    ids = [c["id"] for m in final if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in final if m["role"] == "tool"]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert sorted(answered) == sorted(ids)
    assert ids[0] == "call_0"  # the provider's id is kept where it is unique
    contents = {m["tool_call_id"]: m["content"] for m in final if m["role"] == "tool"}
    assert [contents[i] for i in ids] == ["1", "2", "3"]


async def test_ids_colliding_with_the_history_are_replaced() -> None:
    async def ping() -> str:
        return "pong"

    history: list[dict[str, Any]] = [
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": None, "tool_calls": [ToolCall("a.b", "ping").to_openai()]},
        {"role": "tool", "tool_call_id": "a.b", "content": "pong"},
        {"role": "assistant", "content": "ok"},
        *USER,
    ]
    # "a_b" is a different string, but Anthropic's format turns "a.b" into "a_b" too.
    script = Script(
        [call_chunk(0, id="a_b", name="ping", args="{}"), finish("tool_calls")], [text_chunk("ok"), finish()]
    )
    agent, _ = make_agent(script, Tools(ping=ping))
    await agent.run(history)
    new_call = script.calls[1]["messages"][-2]["tool_calls"][0]
    assert new_call["id"] not in ("a.b", "a_b")
    assert script.calls[1]["messages"][-1]["tool_call_id"] == new_call["id"]


@pytest.mark.parametrize(
    ("reason", "kind", "words"),
    [("length", "length", "token limit"), ("content_filter", "content_filter", "content filter")],
)
async def test_cut_or_filtered_answer_ends_with_a_notice(reason: str, kind: str, words: str) -> None:
    script = Script([text_chunk("Half of it"), finish(reason)])
    agent, sink = make_agent(script, Tools())
    outcome = await agent.run(USER)
    assert outcome.status == "completed" and outcome.finish_reason == reason
    assert [(e[1], words in e[2]) for e in sink.of("notice")] == [(kind, True)]


async def test_normal_finish_has_no_notice() -> None:
    agent, sink = make_agent(Script([text_chunk("All of it"), finish("stop")]), Tools())
    outcome = await agent.run(USER)
    assert outcome.finish_reason == "stop" and sink.of("notice") == []


async def test_an_empty_answer_is_explained() -> None:
    agent, sink = make_agent(Script([finish("stop")]), Tools())
    assert (await agent.run(USER)).status == "completed"
    assert [e[1] for e in sink.of("notice")] == ["empty"]


async def test_a_result_that_cannot_be_recorded_ends_as_an_error_the_reader_sees() -> None:
    """The sink fails to record a result (say the database refuses it): the call ends as an
    error result, recorded and shown, and the model is told so; the turn goes on."""

    class Refusing(RecordingSink):
        async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult) -> None:
            if not result.is_error:
                raise ValueError("cannot store this")
            await super().tool_finished(step, position, call, result)

    async def lookup() -> dict[str, str]:
        return {"found": "yes"}

    script = Script(
        [call_chunk(0, id="a", name="lookup", args="{}"), finish("tool_calls")],
        [text_chunk("Sorry."), finish()],
    )
    agent, _ = make_agent(script, Tools(lookup=lookup))
    sink = Refusing()
    agent.sink = sink
    outcome = await agent.run(USER)

    assert outcome.status == "completed"
    assert sink.of("tool_done") == [("tool_done", 0, 0, True, False)]
    tool_message = script.calls[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "could not be recorded (ValueError)" in tool_message["content"]
