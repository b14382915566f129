"""Fitting requests to a small context window (agent/context.py and the loop's use of it),
against a scripted provider that refuses any request over its window, as real providers do."""

from __future__ import annotations

import json
from typing import Any

from agent.context import READ_TOOL, Budget, Fitter, refer_to_files, retry_limit
from agent.llm import LiteLLMModel, ModelConfig
from agent.loop import COMPACTED_NOTICE, Agent, CancelToken
from agent.types import Usage

from .helpers import USER, RecordingSink, Script, Tools, call_chunk, finish, text_chunk

WINDOW = 4000
RESERVE = 500


class MemorySummarizer:
    """Stores summaries in a dict, as the host stores them in the database."""

    def __init__(self) -> None:
        self.stored: dict[str, str] = {}
        self.made: list[tuple[str, int]] = []  # (key, messages covered by the new span)

    async def lookup(self, keys: list[str]) -> dict[str, str]:
        return {key: self.stored[key] for key in keys if key in self.stored}

    async def make(self, key: str, previous: str, span: list[dict[str, Any]]) -> tuple[str, Usage]:
        assert key not in self.stored, "a span was summarized twice"
        self.made.append((key, len(span)))
        text = f"{previous} Then {len(span)} more messages about pages.".strip()
        self.stored[key] = text
        return text, Usage(prompt_tokens=100, completion_tokens=10)


def fitted_agent(
    script: Script, tools: Tools, *, limit: int | None = WINDOW, summarizer: Any = None
) -> tuple[Agent, RecordingSink]:
    sink = RecordingSink()
    model = LiteLLMModel(
        ModelConfig(model="scripted/test", retries=0, backoff_s=0, context_limit=limit, answer_reserve=RESERVE),
        completion=script,
    )
    return Agent(model, tools, sink, CancelToken(), fitter=model.fitter(summarizer)), sink


def page(n: int) -> str:
    return f"Page {n}: " + " ".join(f"word{n}x{i}" for i in range(250))


async def fetch(n: int) -> str:
    return page(n)


def exchange(n: int) -> list[list[dict[str, Any]]]:
    """A tool step (a large result), then an answer."""
    return [
        [call_chunk(0, id=f"call-{n}", name="fetch", args=json.dumps({"n": n})), finish("tool_calls")],
        [text_chunk(f"Answer {n}."), finish()],
    ]


async def test_a_hundred_tool_heavy_exchanges_keep_answering_within_the_window() -> None:
    summarizer = MemorySummarizer()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    requests = 0
    for n in range(100):
        script = Script(*exchange(n), window=WINDOW)
        agent, _ = fitted_agent(script, Tools(fetch=fetch), summarizer=summarizer)
        outcome = await agent.run([*history, {"role": "user", "content": f"Fetch page {n}."}])
        assert outcome.status == "completed", (n, outcome.error)
        assert max(script.sizes) <= WINDOW - RESERVE, (n, script.sizes)
        requests += len(script.calls)
        history = agent.messages
    # The stored conversation is whole: every result as the tool returned it.
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert results == [json.dumps(page(n)) for n in range(100)]
    # A summary per span, each reused by the calls after it; far fewer than the calls.
    assert summarizer.made and len(summarizer.made) <= requests // 10
    assert len({key for key, _ in summarizer.made}) == len(summarizer.made)


async def test_summary_is_found_again_and_not_rewritten_for_the_next_call() -> None:
    summarizer = MemorySummarizer()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    reused = 0
    for n in range(30):
        made = len(summarizer.made)
        script = Script(*exchange(n), window=WINDOW)
        agent, sink = fitted_agent(script, Tools(fetch=fetch), summarizer=summarizer)
        await agent.run([*history, {"role": "user", "content": f"Fetch page {n}."}])
        history = agent.messages
        system = script.calls[-1]["messages"][0]["content"]
        if summarizer.made and len(summarizer.made) == made:
            # No new summary this exchange: the stored one opens the request.
            assert system.endswith(list(summarizer.stored.values())[-1])
            reused += 1
        notices = [e[2] for e in sink.of("notice") if e[1] == "summary"]
        if len(summarizer.made) > made:
            # The reader is told where a summary was written, with the summary.
            assert notices == [list(summarizer.stored.values())[-1]]
        else:
            assert notices == []
    assert summarizer.made and reused >= 2 * len(summarizer.made)


async def test_old_results_become_stubs_the_model_reads_back_by_handle() -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for n in range(5):
        script = Script(*exchange(n), window=WINDOW)
        agent, _ = fitted_agent(script, Tools(fetch=fetch))
        await agent.run([*history, {"role": "user", "content": f"Fetch page {n}."}])
        history = agent.messages
    script = Script(
        [call_chunk(0, id="read", name=READ_TOOL, args='{"handle": "call-0", "offset": 10, "limit": 50}'), finish()],
        [text_chunk("It said word0x1."), finish()],
        window=WINDOW,
    )
    agent, sink = fitted_agent(script, Tools(fetch=fetch))
    outcome = await agent.run([*history, {"role": "user", "content": "What did page 0 say?"}])
    assert outcome.status == "completed"
    first = script.calls[0]
    stubbed = [m["content"] for m in first["messages"] if m["role"] == "tool"]
    assert any('read_tool_result(handle="call-0")' in c for c in stubbed)
    assert READ_TOOL in [t["function"]["name"] for t in first["tools"]]
    read = script.calls[1]["messages"][-1]
    assert read["role"] == "tool" and read["tool_call_id"] == "read"
    assert json.dumps(page(0))[10:60] in read["content"] and "offset=60" in read["content"]
    assert ("notice", "compacted", COMPACTED_NOTICE) in sink.events
    assert max(script.sizes) <= WINDOW - RESERVE


async def test_a_short_chat_is_sent_as_it_is() -> None:
    script = Script([text_chunk("Hi."), finish()], window=WINDOW)
    agent, sink = fitted_agent(script, Tools(fetch=fetch))
    await agent.run(USER)
    assert script.calls[0]["messages"] == USER
    assert [t["function"]["name"] for t in script.calls[0]["tools"]] == ["fetch"]
    assert not sink.of("notice")


async def test_context_length_error_triggers_exactly_one_fitted_retry() -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fetch."}]
    for n in range(4):
        history += [
            {"role": "assistant", "content": None, "tool_calls": [_call(f"c{n}")]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": page(n)},
        ]
    history.append({"role": "user", "content": "And now?"})
    # The budget is unknown (no override, LiteLLM does not know the model): the provider's
    # error is what says the request was too long.
    script = Script([text_chunk("Fine."), finish()], window=WINDOW)
    agent, sink = fitted_agent(script, Tools(fetch=fetch), limit=None)
    outcome = await agent.run(history)
    assert outcome.status == "completed"
    assert len(script.calls) == 2
    assert script.sizes[0] > WINDOW >= script.sizes[1]
    assert [e[1] for e in sink.of("notice")][:1] == ["retry"]


async def test_a_retry_that_is_still_too_long_ends_the_turn_after_one_retry() -> None:
    huge = [{"role": "system", "content": "rules " * 6000}, {"role": "user", "content": "hi"}]
    script = Script([text_chunk("never"), finish()], window=WINDOW)
    agent, _ = fitted_agent(script, Tools(), limit=None)
    outcome = await agent.run(huge)
    assert outcome.status == "failed" and outcome.error_kind == "context_window"
    assert len(script.calls) == 2


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "fetch", "arguments": "{}"}}


async def test_fitting_never_changes_the_messages_it_is_given() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "x"}]
    for n in range(6):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [_call(f"c{n}")]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": page(n)},
        ]
    before = json.loads(json.dumps(messages))
    fitter = Fitter(Budget(3000, 0), lambda m: len(json.dumps(m)) // 4, lambda t: 0)
    fitted = await fitter.fit(messages, None)
    assert messages == before
    # Oldest first, and no more than needed.
    stubbed = [m["tool_call_id"] for m in fitted.messages if m["role"] == "tool" and READ_TOOL in m["content"]]
    assert stubbed == ["c0", "c1"] and fitted.compacted == 2 and fitted.tokens <= 3000


def test_images_before_the_last_question_are_referred_to() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": [{"type": "text", "text": "and this"}, image]},
    ]
    fitted, referred = refer_to_files(messages)
    assert referred == 1
    assert fitted[0]["content"][1] == {"type": "text", "text": "[An image shown earlier; not sent again]"}
    assert fitted[2] == messages[2]


async def test_images_read_earlier_are_referred_to_only_when_the_request_is_too_long() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4000}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": [{"type": "text", "text": "and this"}, image]},
    ]
    fitter = Fitter(Budget(3000, 0), lambda m: len(json.dumps(m)) // 4, lambda t: 0)
    assert (await fitter.fit(messages, None)).referred == 0
    fitter = Fitter(Budget(1500, 0), lambda m: len(json.dumps(m)) // 4, lambda t: 0)
    fitted = await fitter.fit(messages, None)
    assert fitted.referred == 1 and fitted.tokens <= 1500
    assert fitted.messages[2] == messages[2]


def test_the_retry_budget_comes_from_the_limit_the_provider_states() -> None:
    openai = "This model's maximum context length is 8000 tokens. However, your messages resulted in 20000 tokens."
    # Our count of the refused request was 18 000: the provider counts 10% more.
    assert retry_limit(openai, 18000, 1000) == int(7000 * 0.9 * 0.9)
    assert retry_limit("prompt is too long: 215000 tokens > 200000 maximum", 210000, 4000) == int(
        196000 * 0.9 * 210000 / 215000
    )
    assert retry_limit("too long", 10000, 0) == 7500
