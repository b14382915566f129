"""A process that streamed from providers exits without a word: no HTTP session is left for the
garbage collector to finalize at interpreter exit. (One was, once per event loop: each was
reported as "Unclosed client session" through the `asyncio` logger, whose LiteLLM filter then
failed with "ImportError: sys.meta_path is None", about 120 lines of tracebacks after the
test summary.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Both ways of reading a provider (Tessera's fast path and LiteLLM's own client), in a one-off
# event loop (as a script or a test makes one) and in the worker's loop, each for an answer, an
# HTTP error and a stream abandoned after its first words (Stop).
SCRIPT = """
import asyncio

import django

django.setup()

from chat.worker import loop as worker_loop
from agent.exceptions import ProviderError
from agent.llm import LiteLLMModel, ModelConfig
from agent.types import TextDelta
from tests.providers.replay import Reply, ReplayServer
from tests.providers.shapes import answer

server = ReplayServer().start()
HI = [{"role": "user", "content": "Hi"}]


def model(fast):
    config = ModelConfig("openai/replay", api_base=server.base_url, api_key="sk-x", fast_path=fast, retries=0)
    return LiteLLMModel(config)


async def answered(fast):
    server.play(answer("Hello there, how are you"))
    assert [e async for e in model(fast).stream(HI, None)]


async def failed(fast):
    server.play(Reply(status=500, error={"error": {"message": "boom"}}))
    try:
        [e async for e in model(fast).stream(HI, None)]
    except ProviderError:
        return
    raise AssertionError("no error")


async def stopped(fast):
    server.play(Reply(chunks=answer("one two three four five six").chunks, gap_s=0.05))
    async for event in model(fast).stream(HI, None):
        if isinstance(event, TextDelta):
            break


for fast in (True, False):
    for case in (answered, failed, stopped):
        asyncio.run(case(fast))
        worker_loop.get().run(case(fast))
worker_loop.shutdown()
server.stop()
print("streamed")
"""


@pytest.mark.timeout(180)
def test_a_process_that_streamed_exits_with_nothing_on_stderr() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=170, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("streamed")
    assert done.stderr == ""
