"""The process's Redis clients (settings.REDIS_URL): one sync client shared by the web process's
views and the toolsets' rate limits, and async clients with a blocking pool for event loops."""

from __future__ import annotations

import redis
import redis.asyncio as aioredis
from django.conf import settings


def async_client(max_connections: int = 64) -> aioredis.Redis:
    # A blocking pool: when every connection is busy (hundreds of turns in one process, or a
    # loop that stalled for a moment) a command waits for one instead of failing.
    pool = aioredis.BlockingConnectionPool.from_url(settings.REDIS_URL, max_connections=max_connections, timeout=20)
    return aioredis.Redis(connection_pool=pool)


_sync_client: redis.Redis | None = None


def sync_client() -> redis.Redis:
    global _sync_client
    if _sync_client is None:
        _sync_client = redis.from_url(settings.REDIS_URL)
    return _sync_client
