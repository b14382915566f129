"""Turns run by the suite's real worker against a scripted provider (tests/providers/replay.py):
the provider as a fixture (`provider`, for every test: tests/conftest.py loads this module as a
plugin; a module's own `provider` takes its place there), a model that talks to it, and waiting
for a chat's turn to end."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from chat.models import Chat, LLMModel, Turn
from tests.providers.replay import ReplayServer


@pytest.fixture
def provider() -> Iterator[ReplayServer]:
    server = ReplayServer().start()
    yield server
    server.stop()


def replay_model(provider: ReplayServer) -> LLMModel:
    return LLMModel.objects.create(name="Replay", model="openai/replay", api_base=provider.base_url, api_key="x")


def finished(chat: Chat, timeout: float = 60) -> Turn:
    """The chat's latest turn once the worker has ended it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turn = Turn.objects.filter(chat=chat).latest("id")
        if not turn.is_active:
            return turn
        time.sleep(0.1)
    raise AssertionError("the worker did not finish the turn")
