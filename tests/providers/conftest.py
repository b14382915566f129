"""Fixtures of the provider replay suite: the replay server and the code path under test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .replay import ReplayServer

# The ways Tessera can talk to an OpenAI-compatible server. Every replay test runs once per path,
# so a second path behind the same seam (issue 17: streaming OpenAI-compatible servers without
# LiteLLM) gets the whole suite by adding an entry that switches the seam to it.
PATHS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "litellm": lambda monkeypatch: None,  # chat.agent.llm.LiteLLMModel, through litellm.acompletion
}


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
