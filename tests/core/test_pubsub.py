"""The channel layer's own subscriber: delivery to channels and groups, a subscription that is
confirmed before group_add returns, and a lost connection reopened with every subscription."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisSingleShardConnection
from django.conf import settings

from core import pubsub


def layer(url: str | None = None, **options: Any) -> pubsub.PubSubLayer:
    return pubsub.PubSubLayer(hosts=[{"address": url or settings.REDIS_URL, **options}], prefix="tessera:test:")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_group_and_channel_messages_reach_their_receivers() -> None:
    async def go() -> list[Any]:
        ours, theirs = layer(), RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix="tessera:test:")
        a, b = await ours.new_channel(), await ours.new_channel()
        await ours.group_add("room", a)
        await ours.group_add("room", b)
        assert isinstance(ours._get_layer()._shards[0], pubsub.Shard)
        # Published by channels-redis's own layer: the wire format is the same.
        await theirs.group_send("room", {"type": "chat.fragment", "n": 1})
        await theirs.send(a, {"type": "direct", "n": 2})
        got = [await asyncio.wait_for(ours.receive(a), 3) for _ in range(2)]
        got.append(await asyncio.wait_for(ours.receive(b), 3))
        await ours.group_discard("room", b)
        await theirs.group_send("room", {"type": "chat.fragment", "n": 3})
        got.append(await asyncio.wait_for(ours.receive(a), 3))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ours.receive(b), 0.3)
        await ours.flush()
        await theirs.flush()
        return got

    assert run(go()) == [
        {"type": "chat.fragment", "n": 1},
        {"type": "direct", "n": 2},
        {"type": "chat.fragment", "n": 1},
        {"type": "chat.fragment", "n": 3},
    ]


def test_a_group_add_is_confirmed_before_it_returns() -> None:
    """A consumer joins its group before it accepts the socket: anything published after
    group_add returned must arrive, however soon."""

    async def go() -> int:
        ours = layer()
        plain = redis.from_url(settings.REDIS_URL)
        received = 0
        for i in range(20):
            name = await ours.new_channel()
            await ours.group_add(f"quick{i}", name)
            channel = ours._get_layer()._get_group_channel_name(f"quick{i}")
            assert plain.publish(channel, ours.serialize({"type": "x", "i": i})) == 1
            received += (await asyncio.wait_for(ours.receive(name), 3))["i"] == i
        await ours.flush()
        return received

    assert run(go()) == 20


def test_a_lost_connection_is_reopened_with_its_subscriptions() -> None:
    async def go() -> list[int]:
        ours = layer()
        plain = redis.from_url(settings.REDIS_URL)
        name = await ours.new_channel()
        await ours.group_add("survivor", name)
        group = ours._get_layer()._get_group_channel_name("survivor")
        shard = ours._get_layer()._shards[0]
        first = shard._subscriber
        # Redis drops every subscriber connection (a restart, a network cut).
        plain.client_kill_filter(_type="pubsub")
        for _ in range(100):
            if shard._subscriber is not None and shard._subscriber is not first:
                break
            await asyncio.sleep(0.02)
        assert shard._subscriber is not first and shard._subscriber.open
        plain.publish(group, ours.serialize({"type": "x", "n": 1}))
        plain.publish(name, ours.serialize({"type": "x", "n": 2}))
        got = [(await asyncio.wait_for(ours.receive(name), 3))["n"] for _ in range(2)]
        await ours.flush()
        return got

    assert run(go()) == [1, 2]


def test_a_quiet_dead_connection_is_found_by_its_ping() -> None:
    async def go() -> bool:
        ours = layer(health_check_interval=0.1)
        name = await ours.new_channel()
        shard = ours._get_layer()._shards[0]
        first = shard._subscriber
        # The connection stops answering without closing (a network partition).
        first.requests.append(asyncio.get_running_loop().create_future())  # a reply that will never be matched
        first.transport.pause_reading()
        for _ in range(150):
            if shard._subscriber is not None and shard._subscriber is not first:
                break
            await asyncio.sleep(0.1)
        reopened = shard._subscriber is not first
        plain = redis.from_url(settings.REDIS_URL)
        plain.publish(name, ours.serialize({"type": "x"}))
        await asyncio.wait_for(ours.receive(name), 3)
        await ours.flush()
        return reopened

    # pubsub.REPLY_TIMEOUT_S bounds the PING's wait: shorten it for the test.
    original = pubsub.REPLY_TIMEOUT_S
    pubsub.REPLY_TIMEOUT_S = 0.5
    try:
        assert run(go())
    finally:
        pubsub.REPLY_TIMEOUT_S = original


def test_a_url_it_does_not_speak_keeps_channels_redis_shard() -> None:
    async def go() -> Any:
        return layer("rediss://localhost:6380/0")._get_layer()._shards[0]

    shard = run(go())
    assert type(shard) is RedisSingleShardConnection


def test_an_unreachable_redis_fails_the_subscription_clearly() -> None:
    async def go() -> None:
        ours = layer("redis://127.0.0.1:1/0")
        with pytest.raises(redis.exceptions.ConnectionError, match="Cannot connect to Redis"):
            await ours.new_channel()

    run(go())
