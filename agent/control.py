"""What the host hands the loop to reach into a running answer: Stop (`CancelToken`) and the
person's guidance (`Inbox`)."""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = ["CancelToken", "Inbox"]


class Inbox(Protocol):
    """Guidance the person sends while the answer runs (steering). `take(step)` returns what
    arrived since the last look, oldest first, recorded by the host as the user's messages
    placed before model call `step`; [] when nothing came. Looked at before every model call."""

    async def take(self, step: int) -> list[str]: ...


class CancelToken:
    """Set by the host (e.g. from a Redis flag); awaited by the loop alongside its work."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()
