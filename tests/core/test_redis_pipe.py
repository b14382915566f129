"""The pipelined Redis connection: replies in order, errors as redis-py raises them, and a broken
or stuck connection failing its callers, never hanging them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from core import redis_pipe


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_concurrent_commands_get_their_own_replies() -> None:
    async def go() -> list[Any]:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        await pipe.execute("DEL", "tessera:test:pipe")
        # Written back to back without waiting: each caller still gets the reply to its command.
        replies = await asyncio.gather(
            *(pipe.execute("RPUSH", "tessera:test:pipe", f"v{i}") for i in range(300)),
            pipe.execute("ECHO", "last"),
        )
        pipe.close()
        return replies

    replies = run(go())
    assert replies[:300] == list(range(1, 301)) and replies[300] == b"last"
    assert redis.from_url(settings.REDIS_URL).lrange("tessera:test:pipe", 0, 2) == [b"v0", b"v1", b"v2"]


def test_error_replies_raise_redis_py_exceptions() -> None:
    async def go() -> None:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        with pytest.raises(NoScriptError):
            await pipe.execute("EVALSHA", "0" * 40, 0)
        with pytest.raises(ResponseError, match="wrong number of arguments"):
            await pipe.execute("GET")
        assert await pipe.execute("PING") == b"PONG"  # the connection is still in step
        pipe.close()

    run(go())


def with_db(url: str, db: int) -> str:
    if url.startswith("unix://"):
        return url.split("?")[0] + f"?db={db}"
    host = url.split("?")[0].removeprefix("redis://").split("/")[0]
    return f"redis://{host}/{db}"


def test_url_database_and_password() -> None:
    url = with_db(settings.REDIS_URL, 7)
    wrong = url + "&password=nope" if url.startswith("unix://") else url.replace("redis://", "redis://:nope@")

    async def go() -> None:
        pipe = redis_pipe.RedisPipe(url)
        await pipe.execute("SET", "tessera:test:db7", "here")
        pipe.close()
        # A password this Redis does not expect: its AUTH error reaches the caller.
        with pytest.raises(ResponseError):
            await redis_pipe.RedisPipe(wrong).execute("PING")

    run(go())
    assert redis.from_url(url).getdel("tessera:test:db7") == b"here"


def test_a_dropped_connection_fails_its_callers_and_the_next_command_reconnects() -> None:
    async def go() -> None:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        await pipe.execute("CLIENT", "SETNAME", "tessera-pipe-test")
        blocked = asyncio.ensure_future(pipe.execute("BLPOP", "tessera:test:never", 30))
        await asyncio.sleep(0.1)
        killer = redis.from_url(settings.REDIS_URL)
        (pipe_id,) = [c["id"] for c in killer.client_list() if c["name"] == "tessera-pipe-test"]
        killer.client_kill_filter(_id=pipe_id)
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(blocked, 5)
        assert await pipe.execute("PING") == b"PONG"
        pipe.close()

    run(go())


def test_a_stuck_server_fails_its_callers(monkeypatch: Any) -> None:
    monkeypatch.setattr(redis_pipe, "REPLY_TIMEOUT_S", 0.3)

    async def go() -> None:
        # A server that accepts and never answers.
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pipe = redis_pipe.RedisPipe(f"redis://127.0.0.1:{port}")
        with pytest.raises(RedisConnectionError, match="did not reply"):
            await asyncio.wait_for(pipe.execute("PING"), 5)
        server.close()

    run(go())


def test_a_refused_connection_hands_callers_back_to_redis_py() -> None:
    async def go() -> None:
        url = "redis://127.0.0.1:1"
        pipe = redis_pipe.for_loop(url)
        assert pipe is not None
        with pytest.raises(RedisConnectionError, match="Cannot connect"):
            await pipe.execute("PING")
        assert redis_pipe.for_loop(url) is None  # for RETRY_CONNECT_S, then tried again

    run(go())


@pytest.mark.parametrize(
    "url", ["rediss://127.0.0.1:6379", "redis://127.0.0.1:6379?socket_timeout=3", "memory://nowhere"]
)
def test_urls_it_does_not_speak_are_left_to_redis_py(url: str) -> None:
    async def go() -> Any:
        return redis_pipe.for_loop(url)

    assert run(go()) is None


def test_a_late_goodbye_from_an_old_connection_leaves_the_new_one_alone() -> None:
    async def go() -> None:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        await pipe.execute("PING")
        old = pipe._protocol
        assert old is not None
        pipe.drop(old, "dropped")
        # A command on the new connection whose reply takes half a second…
        pending = asyncio.ensure_future(pipe.execute("BLPOP", "tessera:test:nothing", "0.5"))
        await asyncio.sleep(0.1)
        old.connection_lost(None)  # …and the old transport's close arriving meanwhile
        assert await asyncio.wait_for(pending, 5) is None
        pipe.close()

    run(go())


def test_many_commands_in_one_write_and_the_first_error_after_every_reply() -> None:
    async def go() -> tuple[list[Any], Any]:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        replies = await pipe.execute_many(("SET", "tessera:test:many", "1"), ("INCR", "tessera:test:many"), ("PING",))
        with pytest.raises(ResponseError, match="wrong number of arguments"):
            await pipe.execute_many(("INCR", "tessera:test:many"), ("GET",), ("INCR", "tessera:test:many"))
        after = await pipe.execute("GET", "tessera:test:many")  # in step: both INCRs ran, in order
        pipe.close()
        return replies, after

    replies, after = run(go())
    assert replies == [b"OK", 2, b"PONG"] and after == b"4"


def test_many_commands_go_out_in_one_write_of_the_transport() -> None:
    """A write is a system call (and wakes Redis): a transaction's four commands are one."""

    async def go() -> tuple[list[Any], int]:
        pipe = redis_pipe.RedisPipe(settings.REDIS_URL)
        await pipe.execute("PING")
        assert pipe._protocol is not None and pipe._protocol.transport is not None
        transport = pipe._protocol.transport
        writes: list[bytes] = []
        real = transport.write

        def counted(data: Any) -> None:
            writes.append(bytes(data))
            real(data)

        transport.write = counted  # type: ignore[method-assign]
        replies = await pipe.execute_many(
            ("MULTI",), ("SET", "tessera:test:one-write", "1"), ("INCR", "tessera:test:one-write"), ("EXEC",)
        )
        pipe.close()
        return replies, len(writes)

    replies, writes = run(go())
    assert replies == [b"OK", b"QUEUED", b"QUEUED", [b"OK", 2]] and writes == 1
