"""The web process's channel layer: channels-redis's pub/sub layer with a leaner subscriber.

Every fragment a worker publishes reaches the web process through the layer's subscriber
connection. channels-redis reads it with redis-py's `PubSub.get_message(timeout=0.1)` in a loop
of its own: per message a wake-up of that task, a timeout scope and redis-py's reply handling
before the message is queued for its socket. Here the subscriber is a plain asyncio protocol with
hiredis that queues each message for its sockets in the same callback that read it: a fragment
reaches its consumer ~0.2 ms sooner, for less CPU (bench/RESULTS.md).

Everything else is channels-redis's: the per-loop layers, the channel and group bookkeeping,
`receive`, publishing and serialisation. A URL the subscriber does not speak (see
`redis_pipe.supports`) keeps channels-redis's own shard.

Delivery stays at most once, as with channels-redis: what is published while the connection is
down is missed (the page asks for a turn's state when it sees a sequence number skipped). A lost
connection is reopened, with every subscription, at once and then with growing pauses; a PING
every `health_check_interval` seconds finds a connection that went quiet without closing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Any

import hiredis
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer, RedisSingleShardConnection
from channels_redis.utils import _wrap_close, decode_hosts
from redis.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from . import redis_pipe

log = logging.getLogger(__name__)

REPLY_TIMEOUT_S = 10.0
PING_INTERVAL_S = 15.0
RECONNECT_MAX_S = 5.0
_PUSHED = (b"message", b"pmessage")


class PubSubLayer(RedisPubSubChannelLayer):
    """`channels_redis.pubsub.RedisPubSubChannelLayer`, its subscriber replaced (see above)."""

    def _get_layer(self) -> RedisPubSubLoopLayer:
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            layer = self._layers[loop] = _LoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)  # as channels-redis does: the loop's close flushes its layer
        return layer


class _LoopLayer(RedisPubSubLoopLayer):
    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts, **kwargs)
        shards: list[RedisSingleShardConnection] = self._shards  # type: ignore[has-type]
        self._shards = [
            Shard(host, self) if redis_pipe.supports(host["address"]) else shard
            for host, shard in zip(decode_hosts(hosts), shards, strict=True)
        ]


class _Subscriber(asyncio.Protocol):
    """One subscriber connection. Pushed messages go straight to the layer; every other reply
    (to SUBSCRIBE, UNSUBSCRIBE, PING, AUTH, SELECT) answers the oldest request, in order."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.reader = hiredis.Reader()
        self.requests: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.open = True

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        # channels-redis's own hand-out to the channel's (or the group's) queues.
        deliver = self.shard._receive_message
        try:
            while (reply := self.reader.gets()) is not False:
                if type(reply) is list and reply and reply[0] in _PUSHED:
                    # [message, channel, data] or [pmessage, pattern, channel, data]
                    deliver({"channel": reply[-2], "data": reply[-1]})
                elif self.requests:
                    future = self.requests.popleft()
                    if future.done():
                        continue
                    if isinstance(reply, hiredis.ReplyError):
                        future.set_exception(ResponseError(str(reply)))
                    else:
                        future.set_result(reply)
                else:
                    raise hiredis.ProtocolError("a reply nobody asked for")
        except hiredis.ProtocolError:
            log.warning("The channel layer's Redis subscriber is out of step; reconnecting", exc_info=True)
            self.close()

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """Writes one command (RESP); its reply comes in the returned future."""
        if not self.open or self.transport is None:
            raise RedisConnectionError("Redis subscriber connection closed")
        future = asyncio.get_running_loop().create_future()
        self.requests.append(future)
        self.transport.write(command)
        return future

    async def call(self, *args: Any) -> Any:
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            return await self.send(redis_pipe.pack(args))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()  # connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        requests, self.requests = self.requests, collections.deque()
        for future in requests:
            if not future.done():
                future.set_exception(RedisConnectionError(f"Redis subscriber connection lost: {exc or 'closed'}"))
        self.shard.lost(self)


class Shard(RedisSingleShardConnection):
    """channels-redis's shard (publishing, bookkeeping) with `_Subscriber` as its subscriber."""

    def __init__(self, host: dict[str, Any], layer: _LoopLayer) -> None:
        super().__init__(host, layer)
        self.options = parse_url(host["address"])
        self.ping_interval_s = float(host.get("health_check_interval") or PING_INTERVAL_S)
        self._subscriber: _Subscriber | None = None
        self._upkeep: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # set when the connection is lost

    async def subscribe(self, channel: str) -> None:
        async with self._lock:
            if channel not in self._subscribed_to:
                subscriber = await self._connected()
                # Confirmed before returning: nothing published from now on is missed.
                await subscriber.call("SUBSCRIBE", channel)
                self._subscribed_to.add(channel)

    async def unsubscribe(self, channel: str) -> None:
        async with self._lock:
            if channel not in self._subscribed_to:
                return
            self._subscribed_to.discard(channel)
            subscriber = self._subscriber
            if subscriber is not None and subscriber.open:
                # A connection that is down has nothing to drop: the next one opens without it.
                with contextlib.suppress(RedisConnectionError, TimeoutError):
                    await subscriber.call("UNSUBSCRIBE", channel)

    async def _connected(self) -> _Subscriber:
        """The open subscriber connection, opened (with every subscription) if there is none.
        Called with the lock held."""
        subscriber = self._subscriber
        if subscriber is not None and subscriber.open:
            return subscriber
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                subscriber = await redis_pipe.open_connection(self.options, lambda: _Subscriber(self))
                try:
                    commands = redis_pipe.setup_commands(self.options)
                    commands += [redis_pipe.pack(("SUBSCRIBE", name)) for name in sorted(self._subscribed_to)]
                    await asyncio.gather(*(subscriber.send(command) for command in commands))
                except BaseException:
                    subscriber.close()
                    raise
        except (OSError, TimeoutError) as exc:
            raise RedisConnectionError(f"Cannot connect to Redis: {exc}") from exc
        self._subscriber = subscriber
        if self._upkeep is None or self._upkeep.done():
            self._upkeep = asyncio.ensure_future(self._keep_up())
        return subscriber

    def lost(self, subscriber: _Subscriber) -> None:
        if subscriber is self._subscriber:
            self._subscriber = None
            self._changed.set()

    async def _keep_up(self) -> None:
        """Reopens a lost connection while there are subscriptions (at once, then after growing
        pauses) and PINGs an idle one, so a connection that died quietly is noticed."""
        pause = 0.0
        while True:
            subscriber = self._subscriber
            if subscriber is None:
                if not self._subscribed_to:
                    return  # the next subscription opens a connection and starts this again
                if pause == 0.0:
                    log.warning("The channel layer's Redis subscriber connection was lost; reconnecting")
                await asyncio.sleep(pause)
                try:
                    async with self._lock:
                        await self._connected()
                except (RedisConnectionError, ResponseError):
                    pause = min(max(pause * 2, 0.1), RECONNECT_MAX_S)
                except Exception:  # whatever it was, this task must live on to try again
                    log.exception("Reopening the channel layer's Redis subscriber failed")
                    pause = min(max(pause * 2, 0.1), RECONNECT_MAX_S)
                else:
                    log.warning("The channel layer's Redis subscriber connection is open again")
                    pause = 0.0
                continue
            self._changed.clear()
            try:
                async with asyncio.timeout(self.ping_interval_s):
                    await self._changed.wait()
                continue  # lost: reconnect
            except TimeoutError:
                pass
            try:
                await subscriber.call("PING")
            except (RedisConnectionError, ResponseError, TimeoutError):
                log.warning("The channel layer's Redis subscriber did not answer a PING")
                subscriber.close()

    async def flush(self) -> None:
        async with self._lock:
            if self._upkeep is not None:
                self._upkeep.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._upkeep
                self._upkeep = None
            if self._subscriber is not None:
                subscriber, self._subscriber = self._subscriber, None
                subscriber.close()
        await super().flush()  # the publishing client and the subscriptions' bookkeeping


__all__ = ["PubSubLayer", "Shard"]
