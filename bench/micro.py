"""What each piece of the message path costs, in CPU per unit, measured alone.

    python -m bench.micro --provider http://127.0.0.1:PORT --redis unix:///…/redis.sock

CPU time (`time.process_time`), not wall time, so other load on a shared machine changes these
figures far less than the end-to-end ones. Every stream comes from the fake provider (another
process, so its own CPU is not counted) at a high token rate, and each figure divides the CPU
this process used by the chunks or messages it handled:

- `litellm`: `litellm.acompletion(model="openai/bench", stream=True)` read to its end, as
  agent/llm.py called it before issue 17 (LiteLLM's end-of-stream rebuild included);
- `seam_litellm` / `seam_fast`: Tessera's seam (`agent.llm.LiteLLMModel.stream`, text
  events, usage, accumulator) on the LiteLLM path (its end-of-stream rebuild kept to the usage
  chunk) and on the fast path (agent/openai_stream.py);
- `openai_sdk`: the openai package's AsyncOpenAI streaming, which LiteLLM wraps;
- `raw_sse`: httpx reading the SSE lines and `json.loads` on each: the least a client can do;
- `send_*`: a channel-layer `group_send` (the worker's share of a fragment), for channels-redis's
  RedisChannelLayer (`redis`) and RedisPubSubChannelLayer (`pubsub`);
- `roundtrip_*`: the same plus the matching `receive` (so minus `send_*`: Daphne's share);
  `roundtrip_tessera` receives through Tessera's own subscriber (core/pubsub.py);
- `sink_*`: Tessera's own worker-side cost per fragment, chat.worker.streaming.TurnSink gathering
  2–3 tokens and flushing them (render, live state to Redis, group_send).

A worker process runs Python on one core at a time (the GIL), so 1 s divided by (tokens per
second × cost per chunk + fragments per second × cost per fragment) is about how many
concurrent turns one worker process can carry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Many streams at a realistic rate, not one fast stream: at 50 tokens/s every chunk arrives on
# its own (its own socket read, its own event-loop wake-up), as it does in production.
STREAMS = 30
TOKENS = 100
TPS = 50.0


def _directive(tag: int) -> str:
    return f"[bench tag={tag} n={TOKENS} tps={TPS:g} ttft=0 para=50 tools=0]"


async def _streams(one: Any, provider: str, tags: Any) -> int:
    counts = await asyncio.gather(*(one(provider, next(tags)) for _ in range(STREAMS)))
    return sum(counts)


async def _measure(label: str, make: Any, repeat: int = 2) -> dict[str, Any]:
    """Best of `repeat` runs: other load only ever adds to a measurement."""
    best = None
    for attempt in range(repeat):
        cpu0, wall0 = time.process_time(), time.monotonic()
        done = await make(attempt)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        # A (units, cpu) answer measured only its own loop, leaving set-up out.
        units, cpu = done if isinstance(done, tuple) else (done, cpu)
        per_unit_us = 1e6 * cpu / max(units, 1)
        if best is None or per_unit_us < best["cpu_us_per_unit"]:
            best = {"units": units, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "cpu_us_per_unit": per_unit_us}
    assert best is not None
    best["cpu_us_per_unit"] = round(best["cpu_us_per_unit"], 1)
    return {label: best}


async def litellm_stream(provider: str, tag: int) -> int:
    import litellm

    litellm.suppress_debug_info = True
    response = await litellm.acompletion(
        model="openai/bench",
        api_base=f"{provider}/v1",
        api_key="x",
        stream=True,
        messages=[{"role": "user", "content": _directive(tag)}],
    )
    chunks = 0
    async for _ in response:
        chunks += 1
    return chunks


_clients: dict[str, Any] = {}


def _client(kind: str, provider: str) -> Any:
    """One client per kind, made before the measurement, reused like a process-wide client: a
    client's creation (an SSL context each) is not a per-chunk cost."""
    if kind not in _clients:
        if kind == "openai":
            from openai import AsyncOpenAI

            _clients[kind] = AsyncOpenAI(base_url=f"{provider}/v1", api_key="x", max_retries=0)
        else:
            import httpx

            limits = httpx.Limits(max_connections=STREAMS, max_keepalive_connections=STREAMS)
            _clients[kind] = httpx.AsyncClient(timeout=60, limits=limits)
    return _clients[kind]


async def seam_stream(provider: str, tag: int, fast: bool) -> int:
    from agent.llm import LiteLLMModel, ModelConfig

    model = LiteLLMModel(
        ModelConfig(model="openai/bench", api_base=f"{provider}/v1", api_key="x", fast_path=fast, retries=0)
    )
    events = 0
    async for _ in model.stream([{"role": "user", "content": _directive(tag)}], None):
        events += 1
    return events


async def openai_stream(provider: str, tag: int) -> int:
    stream = await _client("openai", provider).chat.completions.create(
        model="bench", stream=True, messages=[{"role": "user", "content": _directive(tag)}]
    )
    chunks = 0
    async for _ in stream:
        chunks += 1
    return chunks


async def raw_sse(provider: str, tag: int) -> int:
    body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": _directive(tag)}]}
    chunks = 0
    async with _client("httpx", provider).stream("POST", f"{provider}/v1/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                json.loads(line[6:])
                chunks += 1
    return chunks


_aiohttp: list[Any] = []


async def raw_aiohttp(provider: str, tag: int) -> int:
    """aiohttp (its C HTTP parser, LiteLLM's default transport) reading the SSE lines, orjson on
    each: what the fast path would cost on aiohttp instead of httpx."""
    import aiohttp
    import orjson

    if not _aiohttp:
        _aiohttp.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
    body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": _directive(tag)}]}
    chunks = 0
    async with _aiohttp[0].post(f"{provider}/v1/chat/completions", json=body) as response:
        async for line in response.content:
            if line.startswith(b"data: {"):
                orjson.loads(line[6:])
                chunks += 1
    return chunks


def _layer(kind: str, redis_url: str, capacity: int) -> Any:
    if kind == "tessera":  # the pub/sub layer with Tessera's own subscriber (core/pubsub.py)
        from core.pubsub import PubSubLayer

        return PubSubLayer(hosts=[redis_url], prefix="bench-micro")
    if kind == "pubsub":
        from channels_redis.pubsub import RedisPubSubChannelLayer

        return RedisPubSubChannelLayer(hosts=[redis_url], prefix="bench-micro")
    from channels_redis.core import RedisChannelLayer

    return RedisChannelLayer(hosts=[redis_url], prefix="bench-micro", capacity=capacity)


async def layer_send(kind: str, redis_url: str, messages: int = 3000) -> tuple[int, float]:
    """The worker's share of a fragment: group_send to a chat group with one socket in it
    (whose receiving side lives elsewhere, so is not counted)."""
    member = _layer(kind, redis_url, messages + 10)
    channel = await member.new_channel()
    await member.group_add("bench-micro-send", channel)
    layer = _layer(kind, redis_url, messages + 10)
    html = "<div hx-swap-oob='beforeend:#tail-1-0'>" + "word " * 8 + "</div>"
    cpu0 = time.process_time()
    for seq in range(messages):
        await layer.group_send("bench-micro-send", {"type": "chat.fragment", "turn": 1, "seq": seq, "html": html})
    cpu = time.process_time() - cpu0
    await member.group_discard("bench-micro-send", channel)
    await layer.flush()
    await member.flush()
    return messages, cpu


async def layer_roundtrip(kind: str, redis_url: str, messages: int = 3000) -> int:
    """`messages` fragments through a group with one member, sent and received in this process:
    what a worker's group_send plus Daphne's receive cost for one fragment."""
    layer = _layer(kind, redis_url, messages + 10)
    channel = await layer.new_channel()
    await layer.group_add("bench-micro", channel)
    html = "<div hx-swap-oob='beforeend:#tail-1-0'>" + "word " * 8 + "</div>"

    async def receive() -> int:
        got = 0
        while got < messages:
            await layer.receive(channel)
            got += 1
        return got

    receiver = asyncio.create_task(receive())
    await asyncio.sleep(0.05)  # subscribed before the first send
    for seq in range(messages):
        await layer.group_send("bench-micro", {"type": "chat.fragment", "turn": 1, "seq": seq, "html": html})
        if seq % 50 == 0:
            await asyncio.sleep(0)  # let the receiver keep up, as Daphne would
    got = await asyncio.wait_for(receiver, 60)
    await layer.group_discard("bench-micro", channel)
    await layer.flush()
    return got


async def sink_flushes(kind: str, redis_url: str, flushes: int = 1000) -> tuple[int, float]:
    """The worker's whole cost per fragment in Tessera's own code: chat.worker.streaming.TurnSink
    gathering text and flushing it (render the new text, store the live state in Redis,
    group_send). 2–3 tokens per flush, as at 50 tokens/s with a 50 ms window."""
    import django
    import redis.asyncio as aioredis

    django.setup()
    from types import SimpleNamespace

    from chat.worker.streaming import TurnSink

    layer = _layer(kind, redis_url, 100_000)
    client = aioredis.from_url(redis_url)
    turn = SimpleNamespace(pk=999_000, chat_id=999_999, notices=[])
    cpu = 0.0
    for turn_number in range(flushes // 160):
        # Turns of ~400 tokens: a flush re-reads the whole step text, so length matters.
        turn.pk = 999_000 + turn_number
        sink = TurnSink(turn, client, window_ms=60_000, layer=layer)  # type: ignore[arg-type]
        await sink.step_started(0)
        token = 0
        cpu0 = time.process_time()
        for _ in range(160):
            for _ in range(2 if token % 2 else 3):
                sep = "\n\n" if token and token % 50 == 0 else " "
                await sink.text(0, f"{sep}q1v{token}")
                token += 1
            await sink.flush()
        cpu += time.process_time() - cpu0
        await client.delete(f"tessera:turn:{turn.pk}:live")
    flushes = 160 * (flushes // 160)
    await client.aclose()
    await layer.flush()
    return flushes, cpu


async def _layer_figures(redis_url: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for kind in ("redis", "pubsub"):
        result |= await _measure(f"send_{kind}", lambda _, k=kind: layer_send(k, redis_url))
        result |= await _measure(f"roundtrip_{kind}", lambda _, k=kind: layer_roundtrip(k, redis_url))
        result |= await _measure(f"sink_{kind}", lambda _, k=kind: sink_flushes(k, redis_url))
    result |= await _measure("roundtrip_tessera", lambda _: layer_roundtrip("tessera", redis_url))
    return result


async def main_async(provider: str, redis_url: str, only: set[str] | None = None) -> dict[str, Any]:
    if only == {"layers"}:
        return await _layer_figures(redis_url)
    tags = iter(range(10_000_000, 20_000_000))
    result: dict[str, Any] = {}
    # Warm-up, not measured: imports, LiteLLM's cached client, connection pools.
    _client("openai", provider)
    _client("httpx", provider)

    async def seam_fast(p: str, t: int) -> int:
        return await seam_stream(p, t, True)

    async def seam_litellm(p: str, t: int) -> int:
        return await seam_stream(p, t, False)

    for one in (litellm_stream, openai_stream, raw_sse, seam_fast, seam_litellm):
        await one(provider, next(tags))
    result |= await _measure("seam_fast", lambda _: _streams(seam_fast, provider, tags))
    result |= await _measure("seam_litellm", lambda _: _streams(seam_litellm, provider, tags))
    if only is not None and "layers" not in only:
        result |= await _measure("litellm", lambda _: _streams(litellm_stream, provider, tags))
        result |= await _measure("raw_sse", lambda _: _streams(raw_sse, provider, tags))
        await raw_aiohttp(provider, next(tags))
        result |= await _measure("raw_aiohttp", lambda _: _streams(raw_aiohttp, provider, tags))
        return result
    result |= await _measure("litellm", lambda _: _streams(litellm_stream, provider, tags))
    # The one per-chunk knob LiteLLM offers: no success-logging hooks per chunk.
    import litellm

    litellm.disable_streaming_logging = True
    result |= await _measure("litellm_no_streaming_logging", lambda _: _streams(litellm_stream, provider, tags))
    litellm.disable_streaming_logging = False
    result |= await _measure("openai_sdk", lambda _: _streams(openai_stream, provider, tags))
    result |= await _measure("raw_sse", lambda _: _streams(raw_sse, provider, tags))
    return result | await _layer_figures(redis_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", required=True)
    parser.add_argument("--redis", default="")
    parser.add_argument("--streams-only", action="store_true", help="only the provider-stream figures")
    parser.add_argument("--layers-only", action="store_true", help="only the channel-layer and sink figures")
    parser.add_argument("--uvloop", action="store_true", help="run under uvloop")
    args = parser.parse_args()
    only = {"streams"} if args.streams_only or not args.redis else None
    if args.layers_only and args.redis:
        only = {"layers"}
    coro = main_async(args.provider, args.redis, only)
    if args.uvloop:
        import uvloop

        print(json.dumps(uvloop.run(coro)))
    else:
        print(json.dumps(asyncio.run(coro)))


if __name__ == "__main__":
    main()
