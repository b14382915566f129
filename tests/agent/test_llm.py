"""The LiteLLM seam (agent/llm.py): streaming, retries before the first chunk only, the
provider's Retry-After, usage, reasoning and finish reasons."""

from __future__ import annotations

import asyncio

import litellm
import pytest

from agent.exceptions import ProviderError
from agent.llm import LiteLLMModel, ModelConfig

from .helpers import USER, Script, Tools, finish, make_agent, rate_limited, text_chunk


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


async def test_retry_after_longer_than_the_cap_fails_at_once() -> None:
    script = Script(rate_limited({"Retry-After": "3600"}), [text_chunk("never"), finish()])
    model = LiteLLMModel(ModelConfig(model="scripted/x", retries=3, backoff_s=0, max_wait_s=5), completion=script)
    with pytest.raises(ProviderError) as info:
        async for _ in model.stream(USER, None):
            pass
    assert info.value.kind == "rate_limited" and len(script.calls) == 1


async def test_retry_waits_as_long_as_retry_after_asks() -> None:
    script = Script(rate_limited({"Retry-After": "0.3"}), [text_chunk("ok"), finish()])
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


async def test_cached_prompt_tokens_are_recorded_in_usage() -> None:
    openai_style = {"prompt_tokens": 1000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 800}}
    anthropic_style = {"prompt_tokens": 900, "completion_tokens": 5, "cache_read_input_tokens": 700}
    script = Script(
        [text_chunk("a"), {"choices": [], "usage": openai_style}],
        [text_chunk("b"), {"choices": [], "usage": anthropic_style}],
    )
    model = LiteLLMModel(ModelConfig(model="scripted/test", retries=0), completion=script)
    totals = []
    for _ in range(2):
        async for event in model.stream(USER, None):
            if hasattr(event, "message"):
                totals.append(event.message.usage.cached_tokens)
    assert totals == [800, 700]


async def test_anthropic_requests_carry_cache_markers_after_the_stable_prefix() -> None:
    script = Script([text_chunk("ok"), finish()])
    model = LiteLLMModel(ModelConfig(model="anthropic/claude-sonnet-4-5", retries=0), completion=script)
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "assistant", "content": "earlier"},
        {"role": "user", "content": "now"},
    ]
    async for _ in model.stream(messages, None):
        pass
    sent = script.calls[0]["messages"]
    marker = {"type": "ephemeral"}
    assert sent[0]["content"] == [{"type": "text", "text": "rules", "cache_control": marker}]
    assert sent[1] == {"role": "assistant", "content": "earlier"}
    assert sent[2]["content"] == [{"type": "text", "text": "now", "cache_control": marker}]
    assert messages[0]["content"] == "rules"  # the transcript is not touched


async def test_openai_requests_carry_no_cache_markers() -> None:
    script = Script([text_chunk("ok"), finish()])
    model = LiteLLMModel(ModelConfig(model="openai/gpt-4o", retries=0, fast_path=False), completion=script)
    async for _ in model.stream([{"role": "system", "content": "rules"}, *USER], None):
        pass
    assert script.calls[0]["messages"][0]["content"] == "rules"
