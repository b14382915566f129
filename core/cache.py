"""Django's Redis cache with one connection pool per process.

Django keeps a cache backend per async context (`caches` is an asgiref `Local`), and its Redis
backend makes its client, its connection pool and so a new Redis connection with each backend.
Under ASGI every request is a context of its own, and in a worker every turn is: each paid a
connect and redis-py's handshake, and left a socket for the garbage collector. Here the backend
objects stay per context, as Django wants, but they share one client per server list and
options for the whole process (redis-py's pools and clients are thread-safe, and a pool that
finds itself in a forked child starts afresh).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient
from django.utils.functional import cached_property

_clients: dict[tuple[Any, ...], RedisCacheClient] = {}
_lock = threading.Lock()


class SharedRedisCacheClient(RedisCacheClient):
    """Also keeps one `redis.Redis` per pool, where Django's makes one per operation (building
    one copies redis-py's table of ~170 reply callbacks)."""

    _client: Any  # Django's own attributes, which its type stubs do not declare
    _get_connection_pool: Any

    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self._redis: dict[int, Any] = {}  # id(pool) → its client

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # Under the lock: Django makes a server's pool on first use, without one of its own.
        with _lock:
            pool = self._get_connection_pool(write)
            client = self._redis.get(id(pool))
            if client is None:
                client = self._redis[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    _servers: list[str]
    _options: dict[str, Any]

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = SharedRedisCacheClient

    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), tuple(sorted((k, repr(v)) for k, v in self._options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = self._class(self._servers, **self._options)
        return client
