"""Tessera's own reader for providers that speak OpenAI chat completions (the fast path).

LiteLLM still decides everything about the provider: which provider a model string names, its
API base and key (from the model's config or the environment LiteLLM reads), the parameters it
takes and how the request body and headers are built (`get_llm_provider`, the provider's chat
config, `get_optional_params`). Only the response is read here: one pooled HTTP session (aiohttp) per
worker, a minimal SSE line parser and orjson, handing each chunk on as the dict it parsed to. No
per-chunk objects and no end-of-stream rebuild: LiteLLM's wrapper costs the worker ~4× the CPU
per chunk (bench/RESULTS.md).

Everything else (retries, error classification, usage, finish reasons, the accumulator) stays in
`llm.LiteLLMModel`, which uses this transport when `ModelConfig.fast_path` is on and `resolve()`
finds a route; failures are raised as the same LiteLLM exception types LiteLLM's own client
would raise, so `provider_errors` classifies both paths alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import litellm
import orjson

from . import loops
from .provider_errors import error_from_event, error_from_response, error_from_transport

if TYPE_CHECKING:
    from .model_config import ModelConfig

log = logging.getLogger(__name__)

# OpenAI-compatible in LiteLLM's list, but signed in some other way than with a static key
# (device-flow or OAuth tokens LiteLLM fetches and refreshes itself): LiteLLM keeps them.
_OWN_AUTH = frozenset({"github_copilot", "chatgpt"})

# What LiteLLM reads for OpenAI's endpoint when no API base is configured.
_OPENAI_BASE_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE")
_OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"

# Parameters only LiteLLM understands; never part of a provider's request body.
_LITELLM_ONLY = frozenset(
    {"num_retries", "max_retries", "timeout", "api_base", "base_url", "api_key", "api_version", "metadata"}
)


@dataclass(frozen=True)
class Route:
    """Where and how to send one model's requests, as LiteLLM resolved them."""

    provider: str
    model: str  # the name the provider knows the model by
    url: str
    headers: tuple[tuple[str, str], ...]
    label: str  # the provider's name in error texts, as LiteLLM writes it ("OpenAIException - …")
    api_key: str = ""


def resolve(config: ModelConfig) -> Route | None:
    """The fast path's route for this model, or None when LiteLLM must stream it (a provider
    that does not speak OpenAI chat completions, one with its own sign-in, or one whose
    address LiteLLM would only find at request time)."""
    try:
        return _resolve(config.model, config.api_base or "", config.api_key or "")
    except Exception:  # an unknown model string: LiteLLM's own call will say what is wrong
        log.debug("No fast path for %s", config.model, exc_info=True)
        return None


@functools.lru_cache(maxsize=256)
def _resolve(model_string: str, api_base: str, api_key: str) -> Route | None:
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    model, provider, env_key, base = litellm.get_llm_provider(model_string, api_base=api_base or None)
    if provider != "openai" and provider not in litellm.constants.openai_compatible_providers:
        return None
    if provider in _OWN_AUTH:
        return None
    if provider == "openai" and not base:
        base = litellm.api_base or next((os.environ[n] for n in _OPENAI_BASE_ENV if os.environ.get(n)), "")
        base = base or _OPENAI_DEFAULT_BASE
    if not base:
        return None
    key = api_key or env_key or ""
    if not key and provider == "openai":
        key = litellm.api_key or litellm.openai_key or os.environ.get("OPENAI_API_KEY", "")
    chat_config = ProviderConfigManager.get_provider_chat_config(model=model, provider=LlmProviders(provider))
    if chat_config is None:
        return None
    url = chat_config.get_complete_url(
        api_base=base, api_key=key or None, model=model, optional_params={}, litellm_params={}, stream=True
    )
    headers = chat_config.validate_environment(
        headers={},
        model=model,
        messages=[],
        optional_params={},
        litellm_params={},
        api_key=key or None,
        api_base=base,
    )
    if not key:
        # A local server that needs no key: send none rather than LiteLLM's placeholder.
        headers = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "api-key")}
    label = "OpenAI" if provider == "openai" else provider[:1].upper() + provider[1:]
    return Route(provider, model, url, tuple(headers.items()), label, key)


def _body(route: Route, kwargs: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The request body and extra headers for one call, built from the keyword arguments the
    seam would pass to `litellm.acompletion`, the way LiteLLM builds them for this provider."""
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager, get_optional_params

    params = {k: v for k, v in kwargs.items() if k not in _LITELLM_ONLY}
    messages = [dict(m) for m in params.pop("messages")]  # a provider's transform may edit them
    for name in ("model", "stream", "drop_params"):
        params.pop(name, None)
    extra_headers = dict(params.pop("extra_headers", None) or {})
    extra_headers.update(params.pop("headers", None) or {})
    optional = get_optional_params(
        model=route.model, custom_llm_provider=route.provider, stream=True, drop_params=True, **params
    )
    chat_config = ProviderConfigManager.get_provider_chat_config(
        model=route.model, provider=LlmProviders(route.provider)
    )
    assert chat_config is not None  # resolve() checked it
    body = chat_config.transform_request(
        model=route.model,
        messages=messages,  # type: ignore[arg-type]
        optional_params=optional,
        litellm_params={},
        headers={},
    )
    # What the openai client does with `extra_body`: its keys join the body itself.
    body.update(body.pop("extra_body", None) or {})
    body["stream"] = True
    return orjson.dumps(body), {str(k): str(v) for k, v in extra_headers.items()}


# One HTTP session per worker: its loop runs every turn of the process, so one connection pool
# serves them all, and the worker closes it when it stops. In any other loop a request has a
# session of its own, closed with its response (loops.py says why).
# aiohttp rather than httpx: reading the same SSE stream costs ~4× less CPU per chunk with
# aiohttp's C HTTP parser and native asyncio protocol than through httpx, httpcore and anyio
# (bench/micro.py: raw_aiohttp against raw_sse); LiteLLM already depends on it.
_pooled: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}


def _new_session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        # Every turn of the process may stream at once: no wait for a free connection.
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
        # Proxies from the environment, as LiteLLM's clients honour them.
        trust_env=True,
    )


def session() -> tuple[aiohttp.ClientSession, bool]:
    """The session for a request in the running loop, and whether it is the request's own (to
    be closed with its response)."""
    loop = asyncio.get_running_loop()
    if not loops.keeps_sessions(loop):
        return _new_session(), True
    found = _pooled.get(loop)
    if found is None or found.closed:
        found = _pooled[loop] = _new_session()
    return found, False


async def open_stream(
    route: Route, kwargs: dict[str, Any]
) -> tuple[aiohttp.ClientResponse, AsyncIterator[dict[str, Any]]]:
    """Sends the request; returns the open response and its chunks (parsed JSON dicts), or
    raises the LiteLLM exception LiteLLM's client would for the same failure."""
    body, extra_headers = _body(route, kwargs)
    headers = dict(route.headers)
    headers.update(extra_headers)
    headers["Accept"] = "text/event-stream"
    seconds = kwargs.get("timeout")
    seconds = float(seconds) if isinstance(seconds, int | float) else DEFAULT_TIMEOUT_S
    # No limit on the whole answer (a long one streams for minutes): on connecting, on the wait
    # for the response, then on each wait for more of the stream (`_ReadDeadline`, not aiohttp's
    # sock_read, which re-arms a timer on every chunk).
    timeout = aiohttp.ClientTimeout(total=None, connect=seconds, sock_read=None)
    http, own = session()
    try:
        async with asyncio.timeout(seconds):
            response = await http.post(route.url, data=body, headers=headers, timeout=timeout)
    except BaseException as exc:
        if own:
            await http.close()
        if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
            raise error_from_transport(exc, route.provider, route.model, route.label) from exc
        raise
    if response.status != 200:
        try:
            text = (await response.read()).decode("utf-8", "replace")
        except (aiohttp.ClientError, OSError, TimeoutError):
            text = ""
        finally:
            response.release()
            if own:
                await http.close()
        raise error_from_response(
            response.status, text, response.headers, route.provider, route.model, route.label, route.api_key
        )
    return response, _chunks(response, route, seconds, http if own else None)


DEFAULT_TIMEOUT_S = 120.0


class _ReadDeadline:
    """Ends a stream that has sent nothing for `seconds`. The reader only notes the time of each
    read; one timer per stream checks it when the deadline would pass and moves itself on. (A
    timeout re-armed on every chunk cost ~8 µs of a chunk's ~100, bench/RESULTS.md, and filled
    the loop's timer heap with cancelled timers.)"""

    def __init__(self, response: aiohttp.ClientResponse, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self.now = loop.time
        self.response = response
        self.seconds = seconds
        self.last = self.now()
        self.expired = False
        self._handle = loop.call_later(seconds, self._check)

    def _check(self) -> None:
        idle = self.now() - self.last
        if idle >= self.seconds:
            self.expired = True
            self.response.close()  # the reader's wait ends with an error, made a timeout there
        else:
            self._handle = asyncio.get_running_loop().call_later(self.seconds - idle, self._check)

    def cancel(self) -> None:
        self._handle.cancel()


def _events(pending: bytes, received: bytes, data: list[bytes]) -> tuple[list[bytes], bytes, bool]:
    """Whole SSE events in `pending + received`: (their data, what is left of an unfinished
    line, whether `[DONE]` came). `data` carries an event's lines across calls."""
    lines = (pending + received).split(b"\n") if pending else received.split(b"\n")
    pending = lines.pop()  # the part after the last newline: not a whole line yet
    events: list[bytes] = []
    for line in lines:
        if line[-1:] == b"\r":
            line = line[:-1]
        if line.startswith(b"data:"):
            payload = line[6:] if line[5:6] == b" " else line[5:]
            if payload == b"[DONE]":
                return events, pending, True
            data.append(payload)
        elif not line and data:
            events.append(data[0] if len(data) == 1 else b"\n".join(data))
            data.clear()
    return events, pending, False


async def _chunks(
    response: aiohttp.ClientResponse,
    route: Route,
    seconds: float = DEFAULT_TIMEOUT_S,
    own: aiohttp.ClientSession | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The stream's `data:` payloads, parsed. A minimal SSE reader: events are separated by a
    blank line, `data:` lines of one event are joined with a newline (no OpenAI-compatible
    server sends more than one), other fields and comments are skipped, `[DONE]` ends it.
    `own`: the request's own session, closed when the stream ends (or is dropped: an unfinished
    generator is closed by its loop, at the latest when the loop shuts down)."""
    loads = orjson.loads
    pending = b""
    data: list[bytes] = []
    done = False
    finished = False
    deadline = _ReadDeadline(response, seconds)
    now = deadline.now
    try:
        async for received in response.content.iter_any():
            deadline.last = now()
            if done:
                continue  # read to the end of the body, so the connection goes back to the pool
            events, pending, done = _events(pending, received, data)
            for event in events:
                chunk = loads(event)
                if type(chunk) is dict and "error" in chunk and not chunk.get("choices"):
                    raise error_from_event(chunk, route.provider, route.model, route.label, route.api_key)
                yield chunk
        if deadline.expired:
            raise TimeoutError(f"No data for {seconds:g} s")
        finished = True
        if done:
            return
        if pending.startswith(b"data:"):
            data.append(pending[6:] if pending[5:6] == b" " else pending[5:])
        if data and data != [b"[DONE]"]:
            yield loads(b"\n".join(data))
    except (aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
        cause: BaseException = exc
        if deadline.expired:
            cause = TimeoutError(f"No data for {seconds:g} s")
        elif isinstance(exc, aiohttp.ClientPayloadError) and not done:
            # The connection dropped: aiohttp raises before handing over what it had already
            # received, and that text reached Tessera before the cut; keep every whole event.
            leftover = b"".join(getattr(response.content, "_buffer", ()))
            events, pending, done = _events(pending, leftover, data)
            for event in events:
                with contextlib.suppress(orjson.JSONDecodeError):
                    yield loads(event)
        raise error_from_transport(cause, route.provider, route.model, route.label) from exc
    finally:
        deadline.cancel()
        if finished:
            response.release()  # read to its end: the connection goes back to the pool
        else:
            # Stop (the task is cancelled) or an error: the connection is closed at once.
            response.close()
        if own is not None:
            await own.close()


async def close_sessions() -> None:
    """Closes the running loop's pooled session (a worker's shutdown)."""
    found = _pooled.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
