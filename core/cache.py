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

    # Django's own attributes, which its type stubs do not declare.
    _servers: list[str]
    _pools: dict[int, Any]
    _pool_class: Any
    _pool_options: dict[str, Any]
    _client: Any
    _get_connection_pool_index: Any

    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self._redis: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)
        client = self._redis.get(index)
        if client is None:
            with _lock:
                client = self._redis.get(index)
                if client is None:
                    client = self._redis[index] = self._client(connection_pool=self._pool_at(index))
        return client

    def _pool_at(self, index: int) -> Any:
        if index not in self._pools:
            self._pools[index] = self._pool_class.from_url(self._servers[index], **self._pool_options)
        return self._pools[index]


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
