"""A streaming answer's text, saved as it grows: while a step streams, its text is written to the
database now and then, so a worker killed mid-answer loses at most the last seconds of it, even
if Redis goes down with it. The writes run in the background, one at a time, never on the path
of a fragment to the page (chat/worker/streaming.py sends those).
"""

from __future__ import annotations

import asyncio
import logging
import time

from chat.live import LiveTurn

from . import turn_store
from .loop import db

log = logging.getLogger(__name__)
# A running answer's text is written to the database at least this often (and whenever a block
# finishes).
CHECKPOINT_S = 2.0
# …but not more often than this, however fast blocks finish: each write costs the worker a
# database round trip, and a fast answer finishes a paragraph every few hundred milliseconds.
CHECKPOINT_MIN_S = 1.0


class Checkpoints:
    """The saved text of one turn's streaming steps, and the next save when it is due."""

    def __init__(self, live: LiveTurn, chat_id: int, turn_id: int) -> None:
        self.live = live
        self.chat_id = chat_id
        self.turn_id = turn_id
        self.saved: dict[tuple[str, int], str] = {}  # (lane, step) → the text last saved
        # Set when a Markdown block of some step finished since the last save: saved sooner.
        self.block_finished = False
        self._at = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def maybe(self) -> None:
        """Writes streaming steps' text to the database in the background when a block finished
        or CHECKPOINT_S passed; one write at a time."""
        if self._task is not None and not self._task.done():
            return
        since = time.monotonic() - self._at
        if since < (CHECKPOINT_MIN_S if self.block_finished else CHECKPOINT_S):
            return
        self.block_finished = False
        pending = {i: text for i, text in self.live.streaming_texts().items() if self.saved.get(i) != text}
        if not pending:
            return
        self._at = time.monotonic()
        self.saved.update(pending)
        self._task = asyncio.ensure_future(self._write(pending))

    async def _write(self, texts: dict[tuple[str, int], str]) -> None:
        try:
            await db(turn_store.checkpoint)(self.chat_id, self.turn_id, texts)
        except Exception:  # the live state still has the text; the next checkpoint tries again
            log.exception("Saving the partial answer of turn %s failed", self.turn_id)
            for index in texts:
                self.saved.pop(index, None)

    async def done(self) -> None:
        """Waits for the write under way: the final save of a step must land after any
        checkpoint of it, never before."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
