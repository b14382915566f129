"""Redis keys a running turn shares between the worker and the web processes.

- `live`: the turn's current view state with its sequence number (what a reconnecting page is
  shown); written by the worker before each fragment it publishes.
- `cancel`: set by Stop; polled by the worker.
- `alive`: a short-lived heartbeat; its absence means no worker is running the turn.
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from core.redis_client import async_client, sync_client

__all__ = ["async_client", "sync_client"]

LIVE_TTL_S = 3600
ALIVE_TTL_S = 10


def key(turn_id: int, name: str) -> str:
    return f"tessera:turn:{turn_id}:{name}"


def request_cancel(turn_id: int) -> None:
    sync_client().set(key(turn_id, "cancel"), "1", ex=LIVE_TTL_S)


def is_alive(turn_id: int) -> bool:
    return bool(sync_client().exists(key(turn_id, "alive")))


def read_state(turn_id: int) -> dict[str, Any] | None:
    raw = sync_client().get(key(turn_id, "live"))
    return json.loads(raw) if raw else None


async def aread_state(client: aioredis.Redis, turn_id: int) -> dict[str, Any] | None:
    raw = await client.get(key(turn_id, "live"))
    return json.loads(raw) if raw else None
