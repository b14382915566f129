"""Fixtures of the provider replay suite: the replay server and the code path under test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .replay import ReplayServer


def _litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM streams the response (`litellm.acompletion`); Tessera's own reader must not run."""
    from django.conf import settings

    from agent import openai_stream

    monkeypatch.setitem(settings.TESSERA, "FAST_PATH", False)
    monkeypatch.setattr(openai_stream, "open_stream", _must_not_run("the fast path"))


def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tessera reads the SSE stream itself (agent/openai_stream.py); LiteLLM only resolves the
    model and builds the request, and its streaming call must not run."""
    import litellm
    from django.conf import settings

    monkeypatch.setitem(settings.TESSERA, "FAST_PATH", True)
    monkeypatch.setattr(litellm, "acompletion", _must_not_run("litellm.acompletion"))


def _must_not_run(what: str) -> Callable[..., Any]:
    async def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{what} ran on the other path")

    return fail


# The ways Tessera can talk to an OpenAI-compatible server. Every replay test runs once per path.
PATHS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {"litellm": _litellm, "fast": _fast}


@pytest.fixture(params=sorted(PATHS))
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    PATHS[request.param](monkeypatch)
    return str(request.param)


@pytest.fixture(scope="session")
def replay_server() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


@pytest.fixture
def replay(replay_server: ReplayServer) -> ReplayServer:
    replay_server.play()
    return replay_server


@pytest.fixture
def provider_model(transactional_db: Any, replay: ReplayServer, path: str) -> Any:
    """An admin-configured model pointing at the replay server, as any OpenAI-compatible server
    is configured: `openai/<name>` with an API base."""
    from chat.models import LLMModel

    return LLMModel.objects.create(
        name="Replay", model="openai/replay", api_base=replay.base_url, api_key="sk-replay", is_default=True
    )
