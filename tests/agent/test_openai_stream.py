"""The fast path (agent/openai_stream.py): which models take it, the SSE reader, Stop closing
the connection, one pooled client per loop, and errors told apart exactly as LiteLLM's own client
tells them. The provider replay suite (tests/providers/) runs every stream shape on both paths."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import litellm
import pytest

from agent import loops, openai_stream
from agent.exceptions import ProviderError
from agent.llm import LiteLLMModel, ModelConfig
from agent.provider_errors import describe_error, retry_after_seconds
from agent.types import Completed, TextDelta
from tests.providers.replay import ReplayServer, Reply
from tests.providers.shapes import answer, finish, role, text, usage

USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    replay = ReplayServer().start()
    yield replay
    replay.stop()


def model(server: ReplayServer, fast: bool = True, **config: Any) -> LiteLLMModel:
    defaults: dict[str, Any] = {"retries": 0, "backoff_s": 0}
    return LiteLLMModel(
        ModelConfig(
            model="openai/replay",
            api_base=server.base_url,
            api_key="sk-test-key-1234",
            fast_path=fast,
            **(defaults | config),
        )
    )


async def collect(llm: LiteLLMModel, messages: list[dict[str, Any]] = USER) -> list[Any]:
    return [event async for event in llm.stream(messages, None)]


# --- which models take the fast path ---------------------------------------------------------


def test_openai_compatible_models_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    route = openai_stream.resolve(ModelConfig("openai/local", api_base="http://h:1/v1", api_key="k1"))
    assert route is not None
    assert (route.provider, route.model, route.url) == ("openai", "local", "http://h:1/v1/chat/completions")
    assert dict(route.headers)["Authorization"] == "Bearer k1"

    monkeypatch.setenv("GROQ_API_KEY", "gk-from-env")
    openai_stream._resolve.cache_clear()
    groq = openai_stream.resolve(ModelConfig("groq/llama-3.1-8b-instant"))
    assert groq is not None and groq.url == "https://api.groq.com/openai/v1/chat/completions"
    assert dict(groq.headers)["Authorization"] == "Bearer gk-from-env"  # where LiteLLM reads it


def test_openai_without_api_base_goes_to_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    openai_stream._resolve.cache_clear()
    route = openai_stream.resolve(ModelConfig("openai/gpt-4o-mini", api_key="sk-x"))
    assert route is not None and route.url == "https://api.openai.com/v1/chat/completions"


@pytest.mark.parametrize(
    "name", ["anthropic/claude-sonnet-4-5", "gemini/gemini-2.0-flash", "ollama_chat/llama3.1", "demo/tessera"]
)
def test_other_wire_formats_stay_with_litellm(name: str) -> None:
    assert openai_stream.resolve(ModelConfig(name, api_base=None)) is None


def test_the_setting_or_a_scripted_model_keeps_litellm() -> None:
    config = ModelConfig("openai/local", api_base="http://h:1/v1", api_key="k")
    assert LiteLLMModel(config).route is not None
    assert LiteLLMModel(ModelConfig("openai/local", api_base="http://h:1/v1", fast_path=False)).route is None

    async def scripted(**kwargs: Any) -> Any:
        raise AssertionError

    assert LiteLLMModel(config, completion=scripted).route is None


def test_a_server_without_a_key_gets_no_authorization_header() -> None:
    route = openai_stream.resolve(ModelConfig("openai/nokey", api_base="http://h:2/v1"))
    assert route is not None and "Authorization" not in dict(route.headers)


# --- the request ------------------------------------------------------------------------------


async def test_the_request_is_built_as_litellm_builds_it(server: ReplayServer) -> None:
    server.play(answer("ok"))
    llm = model(server, extra={"temperature": 0.2, "num_retries": 4, "max_retries": 3, "seed": 7})
    await collect(llm)
    (request,) = server.requests
    body = request.body
    assert body["model"] == "replay" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2 and body["seed"] == 7
    assert "num_retries" not in body and "max_retries" not in body and "timeout" not in body
    assert request.headers["authorization"] == "Bearer sk-test-key-1234"
    assert request.headers["accept"] == "text/event-stream"


async def test_a_server_rejecting_stream_options_is_asked_again_without_it(server: ReplayServer) -> None:
    rejected = Reply(status=400, error={"error": {"message": "Unrecognized request argument: stream_options"}})
    server.play(rejected, answer("ok"))
    llm = LiteLLMModel(ModelConfig("openai/replay-old", api_base=server.base_url + "/", api_key="k", retries=0))
    events = await collect(llm)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]
    assert "stream_options" in server.requests[0].body and "stream_options" not in server.requests[1].body


# --- the stream -------------------------------------------------------------------------------


class FakeResponse:
    """An aiohttp response as the reader uses it: its body in pieces as they arrive."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.content = self
        self.closed = False

    async def iter_any(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece

    def release(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True


ROUTE = openai_stream.Route("openai", "m", "http://h/v1/chat/completions", (), "OpenAI")


async def parse(pieces: list[bytes]) -> list[Any]:
    response = FakeResponse(pieces)
    chunks = [chunk async for chunk in openai_stream._chunks(response, ROUTE)]  # type: ignore[arg-type]
    assert response.closed
    return chunks


async def test_sse_events_split_anywhere_are_read_whole() -> None:
    events = b"".join(
        b"data: " + json.dumps({"choices": [{"delta": {"content": f"w{i}"}}]}).encode() + b"\r\n\r\n" for i in range(5)
    )
    events += b": keep-alive\n\nevent: message\ndata: [DONE]\n\n"
    expected = [{"choices": [{"delta": {"content": f"w{i}"}}]} for i in range(5)]
    for size in (1, 3, 7, 64, len(events)):
        pieces = [events[i : i + size] for i in range(0, len(events), size)]
        assert await parse(pieces) == expected


async def test_sse_multi_line_data_and_a_stream_without_done() -> None:
    assert await parse([b'data: {"a":\ndata: 1}\n\n', b'data:{"b": 2}']) == [{"a": 1}, {"b": 2}]


async def test_an_error_event_in_the_stream_is_a_provider_error() -> None:
    with pytest.raises(litellm.RateLimitError):
        await parse([b'data: {"error": {"message": "Rate limit reached", "code": 429}}\n\n'])


async def test_a_broken_chunk_is_a_provider_error_not_a_crash() -> None:
    with pytest.raises(litellm.APIError):
        await parse([b"data: {not json\n\n"])


async def test_text_usage_and_finish_reason(server: ReplayServer) -> None:
    server.play(
        Reply([role(), text("Hel"), text("lo"), {"delta": {"reasoning_content": "hmm"}}, finish("length"), usage(9, 2)])
    )
    llm = model(server)
    events = await collect(llm)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    done = events[-1]
    assert isinstance(done, Completed)
    assert done.message.content == "Hello" and done.message.reasoning == "hmm"
    assert done.message.finish_reason == "length"
    assert (done.message.usage.prompt_tokens, done.message.usage.completion_tokens) == (9, 2)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "litellm"])
async def test_usage_is_counted_when_the_provider_reports_none(server: ReplayServer, fast: bool) -> None:
    server.play(answer("Four words right here."))
    events = await collect(model(server, fast=fast))
    usage_ = events[-1].message.usage
    assert usage_.prompt_tokens > 0 and usage_.completion_tokens > 0


async def test_litellm_path_does_not_rebuild_the_answer(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM's end-of-stream rebuild sees only the usage chunk, not the whole answer."""
    seen: list[int] = []
    builder = litellm.stream_chunk_builder

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(len(kwargs.get("chunks") or []))
        return builder(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", spy)
    server.play(Reply([*answer(" ".join(["word"] * 50)).chunks, usage(7, 50)]))
    events = await collect(model(server, fast=False))
    await asyncio.sleep(0.05)  # LiteLLM's logging task
    assert events[-1].message.usage.completion_tokens == 50
    assert seen and max(seen) <= 1


# --- Stop, pooling ------------------------------------------------------------------------------


async def test_stop_closes_the_http_stream_at_once() -> None:
    closed = asyncio.Event()

    async def stalling(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        data = b'data: {"choices": [{"delta": {"content": "Hi"}}]}\n\n'
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()
        await reader.read()  # a provider still "thinking": returns when the client hangs up
        closed.set()
        writer.close()

    tcp = await asyncio.start_server(stalling, "127.0.0.1", 0)
    port = tcp.sockets[0].getsockname()[1]
    llm = LiteLLMModel(ModelConfig("openai/stall", api_base=f"http://127.0.0.1:{port}/v1", api_key="k"))
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in llm.stream(USER, None):
            if isinstance(event, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 5)
    task.cancel()  # what Stop does to the loop's model call
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(closed.wait(), 1)
    assert llm.partial.content == "Hi"
    tcp.close()


async def test_one_pooled_session_in_a_long_lived_loop(server: ReplayServer) -> None:
    loop = asyncio.get_running_loop()
    loops.keep_sessions(loop)  # what the worker's loop does
    try:
        pooled, own = openai_stream.session()
        assert not own and openai_stream.session() == (pooled, False)
        server.play(answer("one"))
        await collect(model(server))
        server.play(answer("two"))
        await collect(model(server))
        idle = pooled.connector._conns  # type: ignore[union-attr]
        assert sum(len(c) for c in idle.values()) == 1  # the second request reused the first one's connection
        await openai_stream.close_sessions()
        assert pooled.closed
    finally:
        loops.forget(loop)
    assert not loops.keeps_sessions(loop)


async def test_a_request_in_any_other_loop_closes_its_own_session(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Any] = []
    new_session = openai_stream._new_session

    def tracked() -> Any:
        made.append(new_session())
        return made[-1]

    monkeypatch.setattr(openai_stream, "_new_session", tracked)
    server.play(answer("one"))
    await collect(model(server))
    server.play(Reply(status=500, error={"error": {"message": "boom"}}))
    with pytest.raises(ProviderError):
        await collect(model(server))
    # A stream dropped half-read (its generator closed, as its loop does at the latest when it ends).
    server.play(answer("three"))
    route = model(server).route
    assert route is not None
    _, chunks = await openai_stream.open_stream(route, {"model": "openai/replay", "messages": USER})
    await anext(chunks)
    await chunks.aclose()  # type: ignore[attr-defined]
    assert len(made) == 3 and all(session.closed for session in made)


# --- errors: the same kinds and messages as LiteLLM's own client ------------------------------

ERRORS = [
    Reply(status=400, error={"error": {"message": "Invalid value for 'temperature'", "type": "invalid_request_error"}}),
    Reply(status=400, error={"error": {"message": "This model's maximum context length is 8192 tokens"}}),
    Reply(status=401, error={"error": {"message": "Incorrect API key provided: sk-test-key-1234"}}),
    Reply(status=403, error={"error": {"message": "Forbidden"}}),
    Reply(status=404, error={"error": {"message": "The model `x` does not exist", "code": "model_not_found"}}),
    Reply(status=429, headers={"Retry-After": "7"}, error={"error": {"message": "Rate limit"}}),
    Reply(status=500, error={"error": {"message": "boom"}}),
    Reply(status=502, error={"error": {"message": "bad gateway"}}),
    Reply(status=503, error={"error": "down"}),
    Reply(status=504, error={"error": {"message": "gateway timeout"}}),
    Reply(status=418, error={"error": {"message": "teapot"}}),
]


async def _failure(server: ReplayServer, reply: Reply, fast: bool) -> ProviderError:
    server.play(reply)
    with pytest.raises(ProviderError) as info:
        await collect(model(server, fast=fast, max_wait_s=5))
    return info.value


@pytest.mark.parametrize("reply", ERRORS, ids=[f"{r.status}-{i}" for i, r in enumerate(ERRORS)])
async def test_http_errors_are_told_apart_as_on_the_litellm_path(server: ReplayServer, reply: Reply) -> None:
    fast = await _failure(server, reply, fast=True)
    slow = await _failure(server, reply, fast=False)
    assert (fast.kind, fast.message, fast.retryable) == (slow.kind, slow.message, slow.retryable)
    assert "sk-test-key-1234" not in fast.message
    cause = fast.__cause__
    assert cause is not None and type(cause) is type(slow.__cause__)
    if reply.status == 429:
        assert retry_after_seconds(cause) == 7


async def test_unprocessable_request_is_a_provider_error(server: ReplayServer) -> None:
    # (LiteLLM itself answers None here after a second request without some parameters.)
    fast = await _failure(server, Reply(status=422, error={"detail": "bad"}), fast=True)
    assert fast.kind == "provider_error" and "Error code: 422" in fast.message and not fast.retryable
    assert len(server.requests) == 1
    slow = await _failure(server, Reply(status=422, error={"detail": "bad"}), fast=False)
    assert slow.kind == "provider_error" and "rejected" in slow.message


async def test_a_key_quoted_in_an_error_is_never_in_its_message(server: ReplayServer) -> None:
    fast = await _failure(
        server, Reply(status=400, error={"error": {"message": "Key sk-test-key-1234 may not use this"}}), fast=True
    )
    assert "sk-test-key-1234" not in fast.message and "[redacted]" in fast.message
    assert "sk-test-key-1234" not in str(fast.__cause__)


async def test_a_connection_that_fails_is_a_connection_error(unused_tcp_port: int) -> None:
    llm = LiteLLMModel(ModelConfig("openai/x", api_base=f"http://127.0.0.1:{unused_tcp_port}/v1", retries=0))
    with pytest.raises(ProviderError) as info:
        await collect(llm)
    assert info.value.kind == "connection"
    assert describe_error(info.value.__cause__)[0] == "connection"  # type: ignore[arg-type]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "litellm"])
async def test_a_stream_cut_mid_answer_keeps_the_text(server: ReplayServer, fast: bool) -> None:
    server.play(Reply([role(), text("Half"), text(" an answer"), text(" lost")], cut_after=3))
    llm = model(server, fast=fast)
    with pytest.raises(ProviderError) as info:
        await collect(llm)
    assert "cut off" in info.value.message and llm.partial.content == "Half an answer"
    assert len(server.requests) == 1


async def _stalling_provider(first: bytes) -> tuple[asyncio.Server, int]:
    """A provider that sends `first` (the response head and any chunks) and then nothing."""

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(first)
        await writer.drain()
        await reader.read()
        writer.close()

    tcp = await asyncio.start_server(stall, "127.0.0.1", 0)
    return tcp, tcp.sockets[0].getsockname()[1]


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
HELLO = b'data: {"choices": [{"delta": {"content": "Hello"}}]}\n\n'


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (b"", ""),  # no response at all
        (HEAD, ""),  # the head, then silence
        (HEAD + b"%x\r\n%s\r\n" % (len(HELLO), HELLO), "Hello"),
    ],
)
async def test_a_stream_that_goes_quiet_ends_as_a_timeout_keeping_its_text(sent: bytes, kept: str) -> None:
    tcp, port = await _stalling_provider(sent)
    llm = LiteLLMModel(
        ModelConfig("openai/quiet", api_base=f"http://127.0.0.1:{port}/v1", api_key="k", retries=0, timeout_s=0.4)
    )
    started = asyncio.get_running_loop().time()
    with pytest.raises(ProviderError) as info:
        await asyncio.wait_for(collect(llm), 5)
    assert info.value.kind == "timeout"
    assert 0.35 < asyncio.get_running_loop().time() - started < 3
    assert llm.partial.content == kept
    tcp.close()


async def test_a_slow_but_steady_stream_is_not_cut(server: ReplayServer) -> None:
    """The deadline is for silence, not for the whole answer: chunks 0.15 s apart for 1 s pass
    a 0.4 s timeout."""
    reply = answer("s s s s s s s")
    reply.gap_s = 0.15
    server.play(reply)
    events = await collect(model(server, timeout_s=0.4))
    assert events[-1].message.content.split() == ["s"] * 7
