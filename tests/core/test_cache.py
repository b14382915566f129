"""core.cache: Django's cache API on one Redis client per process."""

from __future__ import annotations

import asyncio
import threading

from asgiref.sync import sync_to_async
from django.core.cache import cache, caches

from core.cache import RedisCache


def _client_id() -> int:
    cache.get("tessera-test-probe")
    return id(caches["default"]._cache)  # type: ignore[attr-defined]


def test_every_async_context_and_thread_shares_one_client() -> None:
    # Django keeps a backend per async context (a request, a worker's turn); each used to open
    # its own Redis connection.
    async def in_tasks() -> set[int]:
        async def one() -> int:
            return await sync_to_async(_client_id, thread_sensitive=False)()

        return {await asyncio.create_task(one()) for _ in range(4)}

    seen = asyncio.run(in_tasks())
    threads: list[int] = []
    worker = threading.Thread(target=lambda: threads.append(_client_id()))
    worker.start()
    worker.join()
    assert len(seen | set(threads) | {_client_id()}) == 1


def test_the_shared_client_keeps_one_connection_pool_and_one_redis_object() -> None:
    client = caches["default"]._cache  # type: ignore[attr-defined]
    assert client.get_client() is client.get_client(write=True)
    cache.set("tessera-test-key", {"a": 1}, 30)
    assert cache.get("tessera-test-key") == {"a": 1}
    assert len(client._pools) == 1
    cache.delete("tessera-test-key")


def test_backends_with_other_servers_or_options_get_their_own_client() -> None:
    one = RedisCache("redis://127.0.0.1:6379/14", {"OPTIONS": {}})
    same = RedisCache("redis://127.0.0.1:6379/14", {"OPTIONS": {}})
    other_db = RedisCache("redis://127.0.0.1:6379/13", {"OPTIONS": {}})
    other_options = RedisCache("redis://127.0.0.1:6379/14", {"OPTIONS": {"socket_timeout": 3}})
    assert one._cache is same._cache
    assert len({id(one._cache), id(other_db._cache), id(other_options._cache)}) == 3
