from __future__ import annotations

import pytest


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Turns handed to the workers (none run here): their ids, in order."""
    from chat.worker import turn_queue

    sent: list[int] = []
    monkeypatch.setattr(turn_queue, "dispatch", lambda ids, headers=None: sent.extend(ids))
    return sent
