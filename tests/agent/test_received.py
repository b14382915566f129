"""What a model call costs however it ends (agent/received.py through the seam and the loop):
a call cut short — stopped, failed mid-stream, or abandoned — is charged its prompt and the
answer received so far, counted with LiteLLM's tokenizer where the provider sent no usage;
settled exactly once; never counted twice when the provider did report; free when the provider
never took the request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

from agent.exceptions import ProviderError
from agent.llm import LiteLLMModel, ModelConfig
from agent.types import Usage
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import role, text

from .helpers import USER, Script, Stream, Tools, call_chunk, finish, make_agent, text_chunk

MODEL = "scripted/test"


class RecordingBudget:
    """Grants every call; records each settlement."""

    def __init__(self) -> None:
        self.settled: list[Usage] = []

    async def reserve(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        return "reserved"

    async def settle(self, reservation: Any, usage: Usage) -> None:
        assert reservation == "reserved"
        self.settled.append(usage)


def prompt_tokens(messages: list[dict[str, Any]] = USER, tools: list[dict[str, Any]] | None = None) -> int:
    return int(litellm.token_counter(model=MODEL, messages=messages, tools=tools))  # type: ignore[arg-type]


def answer_tokens(text: str) -> int:
    return int(litellm.token_counter(model=MODEL, text=text, count_response_tokens=True))


async def _stop_after(agent: Any, sink: Any, texts: int) -> Any:
    task = asyncio.create_task(agent.run(USER))
    while len(sink.of("text")) < texts:
        await asyncio.sleep(0.01)
    agent.cancel.set()
    return await asyncio.wait_for(task, 5)


async def test_a_stopped_stream_is_charged_its_prompt_and_the_answer_received_so_far() -> None:
    gate = asyncio.Event()  # never set: the model stalls after two pieces
    stream = Stream(
        [text_chunk("The history of "), text_chunk("the web began"), text_chunk(" late"), finish()], gate, 2
    )
    agent, sink = make_agent(Script(stream), Tools())
    budget = agent.budget = RecordingBudget()

    outcome = await _stop_after(agent, sink, 2)

    expected = Usage(prompt_tokens(), answer_tokens("The history of the web began"))
    assert outcome.status == "cancelled"
    assert budget.settled == [expected], "settled once, with what was spent"
    assert expected.prompt_tokens > 0 and expected.completion_tokens > 0
    assert outcome.usage == expected  # the turn's usage (its messages and the user's total) too


async def test_a_provider_failure_mid_stream_is_charged_what_was_received() -> None:
    boom = litellm.InternalServerError("stream broke", llm_provider="openai", model="x")
    script = Script([text_chunk("Half an"), text_chunk(" answer"), boom])
    agent, sink = make_agent(script, Tools(), retries=3)
    budget = agent.budget = RecordingBudget()

    outcome = await agent.run(USER)

    assert outcome.status == "failed" and len(script.calls) == 1
    assert budget.settled == [Usage(prompt_tokens(), answer_tokens("Half an answer"))]
    assert sink.of("assistant")[0][2:4] == ("failed", "Half an answer")


async def test_a_finished_call_is_charged_the_providers_usage_once() -> None:
    agent, _ = make_agent(Script([text_chunk("All of it."), finish()]), Tools())
    budget = agent.budget = RecordingBudget()
    await agent.run(USER)
    assert budget.settled == [Usage(10, 5)]  # the provider's report, nothing counted on top


async def test_a_cut_stream_trusts_the_providers_report_and_never_adds_the_count_to_it() -> None:
    """Some providers report running usage mid-stream (Anthropic: the prompt at once, the answer
    so far): the prompt as reported, the answer as reported or as counted, whichever is more."""
    running = {"prompt_tokens": 4321, "completion_tokens": 1}
    boom = litellm.APIConnectionError("connection reset", llm_provider="openai", model="x")
    script = Script([{"choices": [], "usage": running}, text_chunk("one two three four five six seven"), boom])
    agent, _ = make_agent(script, Tools(), retries=0)
    budget = agent.budget = RecordingBudget()
    await agent.run(USER)
    assert budget.settled == [Usage(4321, answer_tokens("one two three four five six seven"))]

    big = {"prompt_tokens": 4321, "completion_tokens": 900}
    script = Script([text_chunk("short"), {"choices": [], "usage": big}, boom])
    agent, _ = make_agent(script, Tools(), retries=0)
    budget = agent.budget = RecordingBudget()
    await agent.run(USER)
    assert budget.settled == [Usage(4321, 900)]


async def test_a_request_the_provider_refused_costs_nothing() -> None:
    refused = litellm.AuthenticationError("bad key", llm_provider="openai", model="x")
    agent, _ = make_agent(Script(refused), Tools())
    budget = agent.budget = RecordingBudget()
    outcome = await agent.run(USER)
    assert outcome.status == "failed" and budget.settled == [Usage()]


async def test_stopped_before_the_first_chunk_is_charged_the_prompt_it_sent() -> None:
    """The provider took the request and is reading it: the prompt is spent, the answer not yet."""
    gate = asyncio.Event()
    agent, sink = make_agent(Script(Stream([text_chunk("late"), finish()], gate, 0)), Tools())
    budget = agent.budget = RecordingBudget()
    task = asyncio.create_task(agent.run(USER))
    while not sink.of("step"):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    agent.cancel.set()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.status == "cancelled"
    assert budget.settled == [Usage(prompt_tokens(), 0)]


async def test_partial_tool_calls_and_reasoning_count_as_output() -> None:
    tools = Tools(lookup=lambda: None)
    gate = asyncio.Event()
    stream = Stream(
        [
            {"choices": [{"delta": {"reasoning_content": "I should look it up."}, "finish_reason": None}]},
            call_chunk(0, id="c1", name="lookup", args='{"query": "the w'),
            text_chunk("Looking."),
            finish("tool_calls"),
        ],
        gate,
        3,
    )
    agent, sink = make_agent(Script(stream), tools)
    budget = agent.budget = RecordingBudget()
    outcome = await _stop_after(agent, sink, 1)
    assert outcome.status == "cancelled"
    output = 'I should look it up.Looking.lookup{"query": "the w'
    assert budget.settled == [Usage(prompt_tokens(tools=tools.specs()), answer_tokens(output))]


async def test_the_seams_partial_usage_is_counted_once_and_follows_the_stream() -> None:
    """`partial.usage` is read after the stream (content, then usage): counting the prompt again
    each time would cost a long transcript's tokenization twice."""
    gate = asyncio.Event()
    model = LiteLLMModel(
        ModelConfig(model=MODEL, retries=0),
        completion=Script(Stream([text_chunk("a b c"), text_chunk(" d e f"), finish()], gate, 1)),
    )
    stream = model.stream(USER, None)
    await stream.__anext__()
    first = model.partial.usage
    assert first == Usage(prompt_tokens(), answer_tokens("a b c"))
    calls = 0
    real = litellm.token_counter

    def counting(*args: Any, **kwargs: Any) -> int:
        nonlocal calls
        calls += 1
        return int(real(*args, **kwargs))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(litellm, "token_counter", counting)
        assert model.partial.usage == first and calls == 0
    gate.set()
    async for _ in stream:
        pass
    assert model.partial.usage == Usage(10, 5)  # finished: the provider's report


async def test_a_call_is_never_free_for_want_of_a_tokenizer() -> None:
    """Where LiteLLM cannot count, about four characters a token: still charged, never failed."""
    boom = litellm.InternalServerError("stream broke", llm_provider="openai", model="x")
    agent, _ = make_agent(Script([text_chunk("Half of a long answer"), boom]), Tools())
    budget = agent.budget = RecordingBudget()

    def broken(*args: Any, **kwargs: Any) -> int:
        raise ValueError("no tokenizer")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(litellm, "token_counter", broken)
        outcome = await agent.run(USER)
    assert outcome.status == "failed"
    assert budget.settled == [Usage(len(json.dumps([USER, []])) // 4, len("Half of a long answer") // 4 + 1)]


async def test_an_unexpected_error_in_the_sink_still_settles_what_the_call_cost() -> None:
    gate = asyncio.Event()
    agent, sink = make_agent(Script(Stream([text_chunk("So far"), finish()], gate, 1)), Tools())
    budget = agent.budget = RecordingBudget()

    async def broken(step: int, message: Any, status: str) -> None:
        raise RuntimeError("the database is gone")

    sink.assistant_message = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await _stop_after(agent, sink, 1)
    assert budget.settled == [Usage(prompt_tokens(), answer_tokens("So far"))]


# --- over real HTTP, on both transports ----------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    replay = ReplayServer().start()
    yield replay
    replay.stop()


def _http_model(server: ReplayServer, fast: bool) -> LiteLLMModel:
    config = ModelConfig(model="openai/replay", api_base=server.base_url, api_key="sk-x", fast_path=fast, retries=0)
    return LiteLLMModel(config)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "litellm"])
async def test_a_connection_cut_mid_answer_is_charged_what_came_before_it(server: ReplayServer, fast: bool) -> None:
    server.play(Reply([role(), text("Half"), text(" an answer"), text(" lost")], cut_after=3))
    llm = _http_model(server, fast)
    with pytest.raises(ProviderError):
        async for _ in llm.stream(USER, None):
            pass
    counted = litellm.token_counter(model="openai/replay", messages=USER)
    assert llm.partial.usage == Usage(counted, answer_tokens("Half an answer"))


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "litellm"])
async def test_an_error_answer_costs_nothing(server: ReplayServer, fast: bool) -> None:
    server.play(Reply(status=400, error={"error": {"message": "bad request", "type": "invalid_request_error"}}))
    llm = _http_model(server, fast)
    with pytest.raises(ProviderError):
        async for _ in llm.stream(USER, None):
            pass
    assert llm.partial.usage == Usage()
