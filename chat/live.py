"""A running turn's live state, and the Redis keys the worker and the web processes share.

`LiveTurn` owns the state of a turn while it runs: what its steps have streamed so far, its
cards, notices, status and the sequence number of the last fragment. It is built when a worker
claims the turn, changed only through its methods, and published in one place (`publish`):
the state is stored first, then the fragment goes to the chat's group with the same number, so
a page that (re)connects in between gets the state and drops the fragment as a duplicate.

Redis keys, per turn:
- `live`: the serialised LiveTurn (what a reconnecting page is shown);
- `cancel`: set by Stop, polled by the worker;
- `alive`: a short-lived heartbeat; its absence means no worker is running the turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import orjson

from core.redis_client import async_client, sync_client

from .events import Sender, send_fragment

__all__ = ["ALIVE_TTL_S", "LIVE_TTL_S", "LiveStep", "LiveTurn", "async_client", "key", "sync_client"]

LIVE_TTL_S = 3600
ALIVE_TTL_S = 10

StepState = Literal["streaming", "complete", "stopped", "failed"]


def key(turn_id: int, name: str) -> str:
    return f"tessera:turn:{turn_id}:{name}"


def request_cancel(turn_id: int) -> None:
    sync_client().set(key(turn_id, "cancel"), "1", ex=LIVE_TTL_S)


def is_alive(turn_id: int) -> bool:
    return bool(sync_client().exists(key(turn_id, "alive")))


@dataclass
class LiveStep:
    """One model call of the turn: its text so far and its tool cards (card view dicts)."""

    index: int
    text: str = ""
    cards: list[dict[str, Any]] = field(default_factory=list)
    state: StepState = "streaming"
    usage: list[int] | None = None  # [prompt tokens, completion tokens] once the call ended
    steered: list[str] = field(default_factory=list)  # the person's guidance read before this call


@dataclass
class LiveTurn:
    id: int
    chat_id: int
    status: str = "running"
    seq: int = 0
    steps: list[LiveStep] = field(default_factory=list)
    # Text, or {"summary": text} for the marker of a running summary (chat.worker.streaming).
    notices: list[str | dict[str, str]] = field(default_factory=list)
    error: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    # A subagent's steps, by lane: the path of its delegation call ("0-1", "0-1/2-0").
    lanes: dict[str, list[LiveStep]] = field(default_factory=dict)
    # Sources numbered for citation so far: [{"n", "title", "url", "kind", "snippet"}].
    sources: list[dict[str, Any]] = field(default_factory=list)

    # --- changes ------------------------------------------------------------------------------
    def steps_of(self, lane: str = "") -> list[LiveStep]:
        return self.lanes.setdefault(lane, []) if lane else self.steps

    def step(self, index: int, lane: str = "") -> LiveStep:
        for step in reversed(self.steps_of(lane)):
            if step.index == index:
                return step
        raise KeyError((lane, index))

    def start_step(self, index: int, lane: str = "") -> LiveStep:
        step = LiveStep(index)
        self.steps_of(lane).append(step)
        return step

    def end_step(self, index: int, text: str, state: StepState, lane: str = "") -> LiveStep:
        step = self.step(index, lane)
        step.text, step.state = text, state
        if state != "complete":
            step.cards = []  # calls cut off mid-stream never ran
        return step

    def finish(
        self, status: str, *, error: str = "", finish_reason: str | None = None, usage: dict[str, int] | None = None
    ) -> None:
        self.status, self.error, self.finish_reason, self.usage = status, error, finish_reason, usage

    def interrupt(self, error: str) -> None:
        """The worker died: whatever was streaming stays as it was, stopped."""
        self.status, self.error = "interrupted", error
        for steps in [self.steps, *self.lanes.values()]:
            for step in steps:
                if step.state == "streaming":
                    step.state = "stopped"
            for step in steps:
                for card in step.cards:
                    if card.get("status") in ("pending", "calling", "waiting"):
                        card["status"] = "cancelled"
                        # A question nobody can answer any more (named by its kind in a card
                        # kept before questions had one key).
                        for key in ("question", "approval", "elicitation"):
                            if key in card:
                                card[key] = None

    def streaming_texts(self) -> dict[tuple[str, int], str]:
        """(lane, step) → the text of every step still streaming, the turn's and its subagents'."""
        found = {}
        for lane, steps in [("", self.steps), *self.lanes.items()]:
            for step in steps:
                if step.state == "streaming" and step.text:
                    found[(lane, step.index)] = step.text
        return found

    # --- serialisation ------------------------------------------------------------------------
    def to_json(self) -> bytes:
        # Stored on every fragment: orjson writes the dataclasses as they are, where
        # json.dumps(asdict()) deep-copied the whole turn first (most of the store's cost).
        try:
            return orjson.dumps(self, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # a tool result orjson cannot write (an integer over 64 bits…)
            return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, raw: str | bytes) -> LiveTurn:
        data = json.loads(raw)  # read rarely (a page reconnecting); keeps integers exact
        steps = [LiveStep(**step) for step in data.pop("steps", [])]
        lanes = {lane: [LiveStep(**step) for step in items] for lane, items in data.pop("lanes", {}).items()}
        return cls(steps=steps, lanes=lanes, **data)

    # --- storage and publishing ---------------------------------------------------------------
    async def publish(
        self, redis: Any, html: str | Callable[[LiveTurn], str], layer: Any = None, *, full: bool = False
    ) -> None:
        """The one way a turn's state changes for readers: next sequence number, state stored,
        then the fragment sent. `html` may be a function of the state (for a fragment that
        shows the sequence number itself, like a whole turn)."""
        self.seq += 1
        if callable(html):
            html = html(self)
        state = (key(self.id, "live"), self.to_json(), LIVE_TTL_S)
        await send_fragment(self.chat_id, self.id, self.seq, html, layer, full=full, redis=redis, state=state)

    def publish_nowait(self, send: Sender, html: str) -> None:
        """`publish` through a sender from `events.sender_nowait`: written at once, the reply
        checked when it comes (the text batches a worker sends on its timer)."""
        self.seq += 1
        send(self.chat_id, self.id, self.seq, html, (key(self.id, "live"), self.to_json(), LIVE_TTL_S))

    async def store(self, redis: Any) -> None:
        await redis.set(key(self.id, "live"), self.to_json(), ex=LIVE_TTL_S)

    @classmethod
    async def aload(cls, redis: Any, turn_id: int) -> LiveTurn | None:
        raw = await redis.get(key(turn_id, "live"))
        return cls.from_json(raw) if raw else None

    @classmethod
    def load(cls, turn_id: int) -> LiveTurn | None:
        raw = sync_client().get(key(turn_id, "live"))
        return cls.from_json(raw) if raw else None  # type: ignore[arg-type]
