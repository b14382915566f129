"""Messages sent to a chat's channel-layer group. The worker sends only through `send_fragment`
and, for text on its timer, `sender_nowait`.

Each message type is a TypedDict whose `type` names the consumer handler (`chat.fragment` →
`ChatConsumer.chat_fragment`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from core import redis_pipe

log = logging.getLogger(__name__)

# The sequence number of a finished turn rendered from the database: above anything streamed,
# so the page applies it whatever it had.
FINAL_SEQ = 10**9


class FragmentMessage(TypedDict):
    type: Literal["chat.fragment"]
    turn: int
    seq: int
    html: str
    full: NotRequired[bool]


class StatusMessage(TypedDict):
    """Out-of-band HTML with no sequence number, for a turn that has no live state yet (one
    queued behind its owner's other turns, chat/worker/turn_queue.py); the consumer forwards it as it
    is, and the worker's first fragment replaces it."""

    type: Literal["chat.status"]
    turn: int
    html: str


class QueueMessage(TypedDict):
    """The chat's waiting messages (queued, and steers not yet taken), the whole box each time:
    every tab of the chat shows the same (chat/pending.py)."""

    type: Literal["chat.queue"]
    html: str


class ExchangeMessage(TypedDict):
    """An exchange no tab has sent itself (a queued message the worker started): appended by
    every tab of the chat that does not show it yet."""

    type: Literal["chat.exchange"]
    turn: int
    html: str


class AppMessage(TypedDict):
    """Out-of-band HTML about an MCP App's View on a finished card (chat/app_asking.py: a call
    it asks to make waiting for the owner's approval, then how that ended), forwarded as it is
    to every tab of the chat."""

    type: Literal["chat.app"]
    html: str


def group_name(chat_id: int) -> str:
    return f"chat.{chat_id}"


def frame(turn_id: int, seq: int, html: str, *, full: bool = False) -> str:
    """What goes on the socket: a sequence marker the page uses to drop stale or duplicate
    fragments after a reconnect, then the out-of-band HTML. A `full` frame carries the whole
    turn (a sync) and is applied whatever came before it."""
    return f"<!--seq {turn_id} {seq}{' full' if full else ''}-->{html}"


async def send_fragment(
    chat_id: int,
    turn_id: int,
    seq: int,
    html: str,
    layer: Any = None,
    *,
    full: bool = False,
    redis: Any = None,
    state: tuple[str, bytes, int] | None = None,
) -> None:
    """Sends a fragment to the chat's sockets. With `redis` and `state` (key, value, seconds to
    live), the state is stored first, in the same round trip when the layer publishes on that
    Redis: one command (a script: SET, then PUBLISH) instead of two, each waiting for its reply,
    written on the loop's pipelined connection (core.redis_pipe) where the URL allows one."""
    layer = layer or get_channel_layer()
    message = _message(turn_id, seq, html, full=full)
    group = group_name(chat_id)
    if state is not None and redis is not None:
        channel = _pubsub_channel(layer, group) if _script.usable else None
        if channel is not None:
            try:
                await _store_and_publish(redis, _script_args(state, channel, layer.serialize(message)))
                return
            except ResponseError as exc:
                # A Redis that refuses scripts (some hosted ones do): two commands from now on.
                log.warning("Redis refused the store-and-publish script (%s); using SET and PUBLISH", exc)
                _script.usable = False
        await redis.set(state[0], state[1], ex=state[2])
    await layer.group_send(group, message)


def status_frame(turn_id: int, html: str) -> str:
    """A status message on the socket: marked with its turn, so the page applies it only while
    the turn is shown and not yet streaming (static/js/chat.js)."""
    return f"<!--status {turn_id}-->{html}"


def queue_frame(html: str) -> str:
    return f"<!--queue-->{html}"


def exchange_frame(turn_id: int, html: str) -> str:
    """Marked with its turn: a tab that already shows it drops it (static/js/chat.js)."""
    return f"<!--exchange {turn_id}-->{html}"


def _message(turn_id: int, seq: int, html: str, *, full: bool = False) -> FragmentMessage:
    message: FragmentMessage = {"type": "chat.fragment", "turn": turn_id, "seq": seq, "html": html}
    if full:
        message["full"] = True
    return message


def _pubsub_channel(layer: Any, group: str) -> str | None:
    """The Redis channel a pub/sub layer publishes the group's messages on, when it has one Redis
    (the process's own: both come from REDIS_URL), else None. channels-redis's pub/sub layer
    publishes a group's messages, serialised by the layer, on one channel named after it; what
    its `group_send` would do, done here so it can share the state's command
    (tests/chat/test_consumers.py checks a real consumer receives it)."""
    inner = _pubsub_layer(layer)
    return None if inner is None else str(inner._get_group_channel_name(group))


def _pubsub_layer(layer: Any) -> Any:
    """This loop's layer of a pub/sub channel layer with one Redis, else None."""
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    inner = layer._get_layer()
    return inner if len(inner._shards) == 1 else None


# SET the state, then PUBLISH the fragment: one command, run by Redis as one step. Sent whole
# with EVAL every time (Redis caches it by its digest): a command that never fails with NOSCRIPT
# needs no second try, which could otherwise overtake a later fragment.
_STORE_AND_PUBLISH = "redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return redis.call('PUBLISH', KEYS[2], ARGV[3])"


class _Script:
    usable = True  # until Redis refuses it


_script = _Script()


def _script_args(state: tuple[str, bytes, int], channel: str, payload: bytes) -> tuple[Any, ...]:
    """The store-and-publish command for `state` (key, value, seconds to live) and a message."""
    key, value, ttl = state
    return ("EVAL", _STORE_AND_PUBLISH, 2, key, channel, value, ttl, payload)


async def _store_and_publish(redis: Any, args: tuple[Any, ...]) -> None:
    pipe = redis_pipe.for_loop(settings.REDIS_URL)
    if pipe is not None:
        try:
            await pipe.execute(*args)
            return
        except RedisConnectionError:
            # The pipe does not retry: this one command goes through redis-py's client, which
            # does (a Redis restarting); the next one opens a new pipe.
            log.warning("Publishing on the pipelined Redis connection failed; retrying with redis-py", exc_info=True)
    await redis.execute_command(*args)


Sender = Callable[[int, int, int, str, tuple[str, bytes, int]], None]


def sender_nowait(layer: Any = None) -> Sender | None:
    """`send_fragment`'s common case without the wait for Redis's reply, when it can be had: the
    script usable, a pub/sub layer on the process's Redis and the loop's pipelined connection
    open and taking writes. The returned function writes the command at once (so fragments leave
    in the order they are sent) and checks the reply when it comes; None means "use
    send_fragment". A reply that never comes right (the connection dropped) costs the page that
    fragment: it sees the sequence number skipped and asks for the turn's state, which the next
    fragment stores whole."""
    if not _script.usable:
        return None
    layer = layer or get_channel_layer()
    inner = _pubsub_layer(layer)
    pipe = redis_pipe.for_loop(settings.REDIS_URL) if inner is not None else None
    if pipe is None or not pipe.ready():
        return None

    def send(chat_id: int, turn_id: int, seq: int, html: str, state: tuple[str, bytes, int]) -> None:
        channel = inner._get_group_channel_name(group_name(chat_id))
        payload = layer.serialize(_message(turn_id, seq, html))
        pipe.send_nowait(*_script_args(state, channel, payload)).add_done_callback(_published)

    return send


def _published(reply: asyncio.Future[Any]) -> None:
    if reply.cancelled():
        return
    try:
        redis_pipe.result(reply.result())
    except ResponseError as exc:
        log.warning("Redis refused the store-and-publish script (%s); using SET and PUBLISH", exc)
        _script.usable = False
    except RedisConnectionError as exc:
        log.warning("A fragment was not published (%s); the page catches up from the turn's state", exc)
