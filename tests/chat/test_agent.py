"""The agent loop and its LiteLLM seam, driven by a scripted model (no Django, no network).

The script stands in for `litellm.acompletion`: each model call pops the next list of chunks,
shaped like LiteLLM's streaming deltas, so the seam's accumulator and retries run for real.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import litellm
import pytest

from chat.agent.exceptions import ProviderError
from chat.agent.llm import LiteLLMModel, ModelConfig, ToolCallAccumulator
from chat.agent.loop import CANCELLED_RESULT, LIMIT_MESSAGE, Agent, CancelToken
from chat.agent.types import AssistantMessage, ToolCall, ToolResult


def text_chunk(text: str) -> dict[str, Any]:
    return {"choices": [{"delta": {"content": text}, "finish_reason": None}]}


def call_chunk(index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None) -> dict:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    delta: dict[str, Any] = {"function": function}
    if index is not None:
        delta["index"] = index
    if id is not None:
        delta["id"] = id
    return {"choices": [{"delta": {"tool_calls": [delta]}, "finish_reason": None}]}


def finish(reason: str = "stop") -> dict[str, Any]:
    return {"choices": [{"delta": {}, "finish_reason": reason}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


class Stream:
    def __init__(self, chunks: list[Any], gate: asyncio.Event | None = None, after: int = 0) -> None:
        self.chunks = chunks
        self.gate = gate
        self.after = after
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Any]:
        for i, chunk in enumerate(self.chunks):
            if self.gate is not None and i == self.after:
                await self.gate.wait()  # a model that stalls mid-answer
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        self.closed = True


class Script:
    """Scripted stand-in for litellm.acompletion; records what each call was sent."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.calls: list[dict[str, Any]] = []
        self.streams: list[Stream] = []

    async def __call__(self, **kwargs: Any) -> Stream:
        self.calls.append({**kwargs, "messages": json.loads(json.dumps(kwargs["messages"]))})
        response = self.responses.pop(0)
        if isinstance(response, BaseException):
            raise response
        stream = response if isinstance(response, Stream) else Stream(response)
        self.streams.append(stream)
        return stream


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    async def step_started(self, step: int) -> None:
        self.events.append(("step", step))

    async def text(self, step: int, delta: str) -> None:
        self.events.append(("text", step, delta))

    async def tool_call_opened(self, step: int, position: int, call_id: str, name: str) -> None:
        self.events.append(("opened", step, position, name))

    async def assistant_message(self, step: int, message: AssistantMessage, status: str) -> None:
        self.events.append(("assistant", step, status, message.content, [c.name for c in message.tool_calls]))

    async def tools_started(self, step: int, calls: list[ToolCall]) -> None:
        self.events.append(("tools", step, [c.name for c in calls]))

    async def tool_finished(self, step: int, position: int, call: ToolCall, result: ToolResult) -> None:
        self.events.append(("tool_done", step, position, result.is_error, result.cancelled))

    async def system_message(self, step: int, content: str) -> None:
        self.events.append(("system", step, content))

    async def notice(self, kind: str, text: str) -> None:
        self.events.append(("notice", kind, text))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]


class Tools:
    """A toolbox of async functions keyed by name; exceptions become error results the same
    way the real executor reports them."""

    def __init__(self, **funcs: Any) -> None:
        self.funcs = funcs
        self.places: list[tuple[str, int, int]] = []

    def specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in self.funcs]

    async def run(self, call: ToolCall, step: int, position: int) -> ToolResult:
        self.places.append((call.name, step, position))
        func = self.funcs.get(call.name)
        if func is None:
            return ToolResult(call.id, f"Error: unknown tool {call.name}", is_error=True)
        try:
            value = await func(**call.parsed_arguments())
        except Exception as exc:
            return ToolResult(call.id, f"Error: {exc}", is_error=True)
        return ToolResult(call.id, json.dumps(value))


def make_agent(
    script: Script, tools: Tools, *, max_iterations: int = 5, retries: int = 2
) -> tuple[Agent, RecordingSink]:
    sink = RecordingSink()
    model = LiteLLMModel(ModelConfig(model="scripted/test", retries=retries, backoff_s=0), completion=script)
    return Agent(model, tools, sink, CancelToken(), max_iterations=max_iterations), sink


USER = [{"role": "user", "content": "hi"}]


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


async def test_rate_limit_before_first_chunk_is_retried() -> None:
    error = litellm.RateLimitError("slow down", llm_provider="openai", model="x")
    script = Script(error, error, [text_chunk("ok"), finish()])
    agent, _ = make_agent(script, Tools(), retries=2)
    outcome = await agent.run(USER)
    assert outcome.status == "completed"
    assert len(script.calls) == 3


async def test_retries_running_out_is_a_clear_error() -> None:
    error = litellm.ServiceUnavailableError("down", llm_provider="openai", model="x")
    script = Script(error, error, error)
    agent, _ = make_agent(script, Tools(), retries=2)
    outcome = await agent.run(USER)
    assert outcome.status == "failed"
    assert "having trouble" in outcome.error
    assert "Traceback" not in outcome.error


async def test_auth_error_is_not_retried() -> None:
    script = Script(litellm.AuthenticationError("bad key", llm_provider="openai", model="x"))
    agent, _ = make_agent(script, Tools(), retries=3)
    outcome = await agent.run(USER)
    assert outcome.status == "failed" and outcome.error_kind == "auth"
    assert len(script.calls) == 1


async def test_error_after_first_chunk_keeps_partial_and_is_not_retried() -> None:
    boom = litellm.InternalServerError("stream broke", llm_provider="openai", model="x")
    script = Script([text_chunk("Half an"), text_chunk(" answer"), boom])
    agent, sink = make_agent(script, Tools(), retries=3)
    outcome = await agent.run(USER)
    assert outcome.status == "failed"
    assert "cut off" in outcome.error
    assert sink.of("assistant") == [("assistant", 0, "failed", "Half an answer", [])]
    assert len(script.calls) == 1


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


# --- The accumulator's provider quirks -----------------------------------------------------------


def test_new_id_at_used_index_opens_new_call() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "one", "function": {"name": "a", "arguments": '{"q": 1}'}}])
    acc.add([{"index": 0, "id": "two", "function": {"name": "b", "arguments": '{"q": 2}'}}])
    calls = acc.calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [("one", "a", '{"q": 1}'), ("two", "b", '{"q": 2}')]


def test_empty_arguments_mean_empty_object() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "z", "function": {"name": "noargs", "arguments": ""}}])
    assert acc.calls()[0].arguments == "{}"


def test_argument_fragments_are_joined_by_index() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}])
    acc.add([{"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}}])
    acc.add([{"index": 0, "function": {"arguments": '{"x": '}}])
    acc.add([{"index": 1, "function": {"arguments": ": 2}"}}, {"index": 0, "function": {"arguments": "1}"}}])
    assert [json.loads(c.arguments) for c in acc.calls()] == [{"x": 1}, {"y": 2}]


def test_whole_calls_without_index_each_get_a_slot() -> None:
    acc = ToolCallAccumulator()
    acc.add(
        [
            {"id": "g1", "function": {"name": "a", "arguments": '{"n": 1}'}},
            {"id": "g2", "function": {"name": "a", "arguments": '{"n": 2}'}},
        ]
    )
    assert [c.id for c in acc.calls()] == ["g1", "g2"]


def test_call_ids_are_sent_back_exactly() -> None:
    odd = "call_abc==/thought+signature"
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": odd, "function": {"name": "a", "arguments": "{}"}}])
    assert acc.calls()[0].to_openai()["id"] == odd


def test_litellm_delta_objects_are_understood() -> None:
    from litellm.types.utils import ChatCompletionDeltaToolCall, Function

    acc = ToolCallAccumulator()
    acc.add([ChatCompletionDeltaToolCall(index=0, id="x", function=Function(name="f", arguments='{"a"'))])
    acc.add([ChatCompletionDeltaToolCall(index=0, function=Function(arguments=": 1}"))])
    assert json.loads(acc.calls()[0].arguments) == {"a": 1}


async def test_provider_error_message_is_safe_to_show() -> None:
    script = Script(litellm.BadRequestError("invalid 'messages'", llm_provider="openai", model="x"))
    model = LiteLLMModel(ModelConfig(model="scripted/x", retries=0, backoff_s=0), completion=script)
    with pytest.raises(ProviderError) as info:
        async for _ in model.stream(USER, None):
            pass
    assert info.value.message.startswith("The model provider returned an error")


# --- Provider stream edges (issue 11) -------------------------------------------------------------


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


@pytest.mark.parametrize("raw", ["[1, 2]", "null", '"text"', "NaN", '{"x": Infinity}', "{", "1e999999"])
def test_transcript_arguments_are_always_a_json_object(raw: str) -> None:
    from chat.agent.types import transcript_arguments

    value = json.loads(transcript_arguments(raw), parse_constant=lambda name: pytest.fail(name))
    assert isinstance(value, dict)


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


async def test_provider_names_for_cut_answers_are_normalised() -> None:
    agent, _ = make_agent(Script([text_chunk("x"), finish("MAX_TOKENS")]), Tools())
    assert (await agent.run(USER)).finish_reason == "length"


async def test_litellm_and_client_retries_are_switched_off() -> None:
    script = Script([text_chunk("ok"), finish()])
    model = LiteLLMModel(
        ModelConfig(model="scripted/x", retries=3, backoff_s=0, extra={"num_retries": 5, "max_retries": 7}),
        completion=script,
    )
    async for _ in model.stream(USER, None):
        pass
    assert script.calls[0]["max_retries"] == 0 and script.calls[0]["num_retries"] == 0
    assert script.calls[0]["stream_options"] == {"include_usage": True}


def _rate_limited(headers: dict[str, str]) -> litellm.RateLimitError:
    import httpx

    error = litellm.RateLimitError("slow down", llm_provider="openai", model="x")
    error.litellm_response_headers = httpx.Headers(headers)  # type: ignore[attr-defined]
    return error


def test_retry_after_in_seconds_milliseconds_and_http_date() -> None:
    from email.utils import format_datetime

    from chat.agent.llm import retry_after_seconds

    assert retry_after_seconds(_rate_limited({"Retry-After": "7"})) == 7
    assert retry_after_seconds(_rate_limited({"retry-after-ms": "1500"})) == 1.5
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=20)
    from_date = retry_after_seconds(_rate_limited({"Retry-After": format_datetime(when, usegmt=True)}))
    assert from_date is not None and 17 < from_date <= 20
    assert retry_after_seconds(_rate_limited({"Retry-After": "soon"})) is None
    assert retry_after_seconds(_rate_limited({})) is None


async def test_retry_after_longer_than_the_cap_fails_at_once() -> None:
    script = Script(_rate_limited({"Retry-After": "3600"}), [text_chunk("never"), finish()])
    model = LiteLLMModel(ModelConfig(model="scripted/x", retries=3, backoff_s=0, max_wait_s=5), completion=script)
    with pytest.raises(ProviderError) as info:
        async for _ in model.stream(USER, None):
            pass
    assert info.value.kind == "rate_limited" and len(script.calls) == 1


async def test_retry_waits_as_long_as_retry_after_asks() -> None:
    script = Script(_rate_limited({"Retry-After": "0.3"}), [text_chunk("ok"), finish()])
    model = LiteLLMModel(ModelConfig(model="scripted/x", retries=3, backoff_s=0.01), completion=script)
    started = asyncio.get_running_loop().time()
    async for _ in model.stream(USER, None):
        pass
    assert asyncio.get_running_loop().time() - started >= 0.3
    assert len(script.calls) == 2


async def test_server_rejecting_stream_options_is_asked_again_without_it() -> None:
    rejected = litellm.BadRequestError(
        "Unrecognized request argument: stream_options", llm_provider="openai", model="x"
    )
    script = Script(rejected, [text_chunk("ok"), finish()], [text_chunk("again"), finish()])
    model = LiteLLMModel(ModelConfig(model="scripted/no-usage", api_base="http://old", retries=0), completion=script)
    async for _ in model.stream(USER, None):
        pass
    assert "stream_options" in script.calls[0] and "stream_options" not in script.calls[1]
    async for _ in model.stream(USER, None):
        pass
    assert "stream_options" not in script.calls[2]  # remembered


async def test_usage_of_the_final_choiceless_chunk_is_recorded() -> None:
    script = Script(
        [
            text_chunk("Hi"),
            {"choices": [{"delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 33}},
        ]
    )
    agent, _ = make_agent(script, Tools())
    outcome = await agent.run(USER)
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (120, 33)


async def test_reasoning_is_never_answer_text_nor_sent_back() -> None:
    script = Script(
        [
            {"choices": [{"delta": {"reasoning_content": "Let me think"}, "finish_reason": None}]},
            {"choices": [{"delta": {"reasoning_content": " hard."}, "finish_reason": None}]},
            text_chunk("Answer."),
            finish(),
        ],
        [text_chunk("Second."), finish()],
    )
    agent, sink = make_agent(script, Tools())
    await agent.run(USER)
    assert [e[2] for e in sink.of("text")] == ["Answer."]
    assert agent.messages[-1] == {"role": "assistant", "content": "Answer."}
    assert agent.model.partial.reasoning == "Let me think hard."  # type: ignore[attr-defined]


def test_same_id_at_index_zero_with_another_name_is_another_call() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "call_0", "function": {"name": "a", "arguments": '{"q": 1}'}}])
    acc.add([{"index": 0, "id": "call_0", "function": {"name": "b", "arguments": '{"q": 2}'}}])
    acc.add([{"index": 0, "id": "call_0", "function": {"name": "b", "arguments": '{"q": 3}'}}])
    assert [(c.name, c.arguments) for c in acc.calls()] == [("a", '{"q": 1}'), ("b", '{"q": 2}'), ("b", '{"q": 3}')]


def test_a_name_repeated_on_every_fragment_is_one_call() -> None:
    acc = ToolCallAccumulator()
    for piece in ['{"q"', ": ", "1}"]:
        acc.add([{"index": 0, "id": "c", "function": {"name": "a", "arguments": piece}}])
    assert [(c.name, c.arguments) for c in acc.calls()] == [("a", '{"q": 1}')]


def test_two_calls_in_one_chunk_and_fragments_without_index() -> None:
    acc = ToolCallAccumulator()
    acc.add(
        [
            {"index": 0, "id": "x", "function": {"name": "a", "arguments": '{"n": 1}'}},
            {"index": 1, "id": "y", "function": {"name": "b", "arguments": '{"n": 2}'}},
        ]
    )
    acc.add([{"id": "z", "function": {"name": "c", "arguments": '{"n"'}}])
    acc.add([{"function": {"arguments": ": 3}"}}])
    assert [(c.id, c.arguments) for c in acc.calls()] == [("x", '{"n": 1}'), ("y", '{"n": 2}'), ("z", '{"n": 3}')]


def test_missing_arguments_key_means_no_arguments() -> None:
    acc = ToolCallAccumulator()
    acc.add([{"index": 0, "id": "k", "function": {"name": "noargs"}}])
    assert acc.calls()[0].arguments == "{}"
    ids = {acc.calls()[0].id for _ in range(3)}
    assert ids == {"k"}


def test_stored_conversation_is_replayed_in_a_shape_every_provider_takes() -> None:
    from chat.agent.transcript import NO_RESULT, canonical

    call = {"type": "function", "function": {"name": "ping", "arguments": '{"broken'}}
    stored: list[dict[str, Any]] = [
        {"role": "user", "content": "one"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**call, "id": "d"}, {**call, "id": "d"}, {**call, "id": "gone"}],
        },
        {"role": "tool", "tool_call_id": "d", "content": "first"},
        {"role": "assistant", "content": "Stopped text of the next step"},  # a dead worker's order
        {"role": "tool", "tool_call_id": "d", "content": "second"},
        {"role": "tool", "tool_call_id": "nobody", "content": "orphan"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "two"},
    ]
    replay = canonical(stored)
    assert [m["role"] for m in replay] == ["user", "assistant", "tool", "tool", "tool", "assistant", "user"]
    calls = replay[1]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}", "{}"]
    assert calls[0]["id"] == "d" and len({c["id"] for c in calls}) == 3
    assert [(m["tool_call_id"], m["content"]) for m in replay[2:5]] == [
        (calls[0]["id"], "first"),
        (calls[1]["id"], "second"),
        (calls[2]["id"], NO_RESULT),
    ]


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("functions.web search", "functions_web_search"),
        ("", "unknown_tool"),
        ("x" * 100, "x" * 64),
        ("ok_name-1", "ok_name-1"),
    ],
)
def test_tool_names_in_the_transcript_are_ones_every_provider_accepts(name: str, sent: str) -> None:
    assert ToolCall("c", name).to_openai()["function"]["name"] == sent


async def test_an_empty_answer_is_explained() -> None:
    agent, sink = make_agent(Script([finish("stop")]), Tools())
    assert (await agent.run(USER)).status == "completed"
    assert [e[1] for e in sink.of("notice")] == ["empty"]
