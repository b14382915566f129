"""Issue 30's figures: what a request costs in prompt tokens, and what fitting costs in time.

    python -m bench.context

Offline and without Django: the agent loop (agent/loop.py) and its LiteLLM seam run for
real against a scripted completion that records each request; tokens are LiteLLM's count for
`gpt-4o` over the whole request (messages and tools), as a provider would bill them.

- `tools`: the first request of a turn with 5, 50 and 200 tools selected, each a definition of
  MCP-server size (about 185 tokens, as the issue measured: 53 tools, 9 815 tokens), all
  definitions sent (before) and with the default tool budget (30 tools / 6 000 tokens: after);
- `long_chat`: a 100-exchange chat where each exchange calls a tool returning ~1 000 tokens and
  then answers, against a model of 16 000 tokens (1 000 kept for the answer); the prompt tokens of
  the 100th exchange's model calls, whole (before: the provider would refuse them) and fitted
  (after); summaries are written by a stand-in summarizer returning ~300 tokens (the summary
  model's own call is a model call like any other and is not timed here);
- `fit_time`: the time `Agent.fit` takes per model call over that chat (counting included).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from typing import Any

# Before LiteLLM is imported: its cost map from the package, not the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm

from agent.catalogue import ToolBudget
from agent.llm import LiteLLMModel, ModelConfig
from agent.loop import Agent, CancelToken
from agent.types import ToolCall, ToolResult, Usage

SYSTEM = {"role": "system", "content": "You are Tessera, a helpful assistant. " * 20}
COUNT_MODEL = "gpt-4o"


def tool_spec(i: int) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": f"toolset__server{i // 10}__operation_{i}",
            "description": (
                f"Performs operation {i} on the server's resources. Use it when the user asks about "
                "the items this server manages; it returns a JSON document describing the matching "
                "items, their status, owners and the time they last changed."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to match in the items' titles."},
                    "limit": {"type": "integer", "description": "How many items to return, 1 to 100."},
                    "include_archived": {"type": "boolean", "description": "Whether archived items count."},
                    "sort": {"type": "string", "enum": ["recent", "title", "owner"], "description": "Order."},
                },
                "required": ["query"],
            },
        },
    }


class Recorder:
    """A scripted completion: `plan(request_number)` says what to answer; each request's size is
    kept."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.sizes: list[int] = []

    async def __call__(self, **kwargs: Any) -> Any:
        size = litellm.token_counter(model=COUNT_MODEL, messages=kwargs["messages"], tools=kwargs.get("tools"))
        self.sizes.append(size)
        chunks = self.plan(len(self.sizes) - 1)

        async def stream() -> Any:
            for chunk in chunks:
                yield chunk

        return stream()


def text(words: str) -> list[dict[str, Any]]:
    return [{"choices": [{"delta": {"content": words}, "finish_reason": "stop"}]}]


def call(call_id: str, name: str) -> list[dict[str, Any]]:
    delta = {"index": 0, "id": call_id, "function": {"name": name, "arguments": "{}"}}
    return [{"choices": [{"delta": {"tool_calls": [delta]}, "finish_reason": "tool_calls"}]}]


class Box:
    def __init__(self, specs: list[dict[str, Any]], result: str = "") -> None:
        self._specs = specs
        self.result = result

    def specs(self) -> list[dict[str, Any]]:
        return self._specs

    async def run(self, c: ToolCall, step: int, position: int) -> ToolResult:
        return ToolResult(c.id, self.result)


class Sink:
    def __getattr__(self, name: str) -> Any:
        async def ignore(*args: Any, **kwargs: Any) -> None:
            return None

        return ignore


async def tools_figures() -> list[tuple[int, int, int]]:
    rows = []
    for n in (5, 50, 200):
        sizes = []
        for budget in (None, ToolBudget()):
            recorder = Recorder(lambda i: text("ok"))
            model = LiteLLMModel(ModelConfig(model="scripted/bench", retries=0), completion=recorder)
            agent = Agent(model, Box([tool_spec(i) for i in range(n)]), Sink(), CancelToken(), tool_budget=budget)
            await agent.run([SYSTEM, {"role": "user", "content": "echo hello"}])
            sizes.append(recorder.sizes[0])
        rows.append((n, sizes[0], sizes[1]))
    return rows


class StandInSummarizer:
    def __init__(self) -> None:
        self.stored: dict[str, str] = {}

    async def lookup(self, keys: list[str]) -> dict[str, str]:
        return {k: self.stored[k] for k in keys if k in self.stored}

    async def make(self, key: str, previous: str, span: list[dict[str, Any]]) -> tuple[str, Usage]:
        self.stored[key] = "The user and the assistant looked at many pages. " * 30
        return self.stored[key], Usage()


async def long_chat_figures() -> dict[str, Any]:
    page = json.dumps({"items": [f"item {i}: a line of a long tool result" for i in range(120)]})
    summarizer = StandInSummarizer()
    history: list[dict[str, Any]] = [SYSTEM]
    fit_times: list[float] = []
    last_sizes: list[int] = []
    whole_last: list[int] = []
    made = 0
    for n in range(100):
        recorder = Recorder(lambda i, n=n: call(f"c{n}", "toolset__web__fetch") if i == 0 else text(f"Answer {n}."))
        config = ModelConfig(model="scripted/bench", retries=0, context_limit=16000, answer_reserve=1000)
        model = LiteLLMModel(config, completion=recorder)
        fitter = model.fitter(summarizer)
        agent = Agent(model, Box([tool_spec(0)], page), Sink(), CancelToken(), fitter=fitter)
        original = agent.fit

        async def timed(tools: Any, limit: int | None = None, original: Any = original, agent: Any = agent) -> Any:
            started = time.perf_counter()
            result = await original(tools, limit)
            fit_times.append(time.perf_counter() - started)
            whole_last.append(litellm.token_counter(model=COUNT_MODEL, messages=agent.messages, tools=tools))
            return result

        agent.fit = timed  # type: ignore[method-assign]
        before = len(summarizer.stored)
        await agent.run([*history, {"role": "user", "content": f"Fetch page {n}."}])
        made += len(summarizer.stored) - before
        history = agent.messages
        last_sizes = recorder.sizes
    return {
        "page_tokens": litellm.token_counter(model=COUNT_MODEL, text=page),
        "whole_100th": whole_last[-2:],
        "fitted_100th": last_sizes,
        "summaries": made,
        "calls": len(fit_times),
        "fit_ms_p50": statistics.median(fit_times) * 1000,
        "fit_ms_p90": statistics.quantiles(fit_times, n=10)[-1] * 1000,
        "fit_ms_max": max(fit_times) * 1000,
    }


async def main() -> None:
    for n, before, after in await tools_figures():
        print(f"tools {n}: first request {before} prompt tokens before, {after} after")
    print(json.dumps(await long_chat_figures(), indent=1))


if __name__ == "__main__":
    asyncio.run(main())
