"""The chat socket: only the chat's owner gets in, and a connect sends a running turn's state."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from chat import live
from chat.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from chat.models import Chat, Turn
from config.asgi import application
from core import redis_pipe

pytestmark = pytest.mark.django_db(transaction=True)


def session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def communicator(
    chat_id: int, cookie: bytes | None = None, origin: bytes = b"http://localhost"
) -> WebsocketCommunicator:
    headers = [(b"origin", origin), (b"host", b"localhost")]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/chats/{chat_id}/", headers=headers)


async def closed_with(comm: WebsocketCommunicator) -> int | None:
    output = await comm.receive_output(timeout=3)
    assert output["type"] == "websocket.close"
    return output.get("code")


async def test_owner_connects(user: Any) -> None:
    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    connected, _ = await comm.connect()
    assert connected
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_other_user_is_refused(user: Any, other_user: Any) -> None:
    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(other_user))
    await comm.connect()
    assert await closed_with(comm) == CLOSE_NOT_FOUND


async def test_anonymous_is_refused(user: Any) -> None:
    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk)
    await comm.connect()
    assert await closed_with(comm) == CLOSE_UNAUTHENTICATED


async def test_foreign_origin_is_refused(user: Any) -> None:
    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user), origin=b"http://evil.example")
    connected, _ = await comm.connect()
    assert not connected


async def test_connect_mid_turn_sends_exact_live_state(user: Any) -> None:
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    state = live.LiveTurn(turn.pk, chat.pk, seq=7, steps=[live.LiveStep(0, text="First paragraph.\n\nSecond is stre")])
    await state.store(live.async_client())
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    message = await comm.receive_from(timeout=3)
    assert message.startswith(f"<!--seq {turn.pk} 7 full-->")
    assert f'id="turn-{turn.pk}"' in message and 'data-seq="7"' in message
    assert "<p>First paragraph.</p>" in message
    assert "<p>Second is stre</p></div>" in message  # the growing block, rendered
    await comm.disconnect()


async def test_a_sync_of_a_cut_answer_brings_its_continue_button(user: Any) -> None:
    """The Continue form lives beside the turn, in its exchange: a sync (the page missed the
    turn's fragments, e.g. they came before the Send's response) must bring it along."""
    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    state = live.LiveTurn(
        turn.pk, chat.pk, status="completed", seq=5, finish_reason="length", steps=[live.LiveStep(0, text="Half")]
    )
    await state.store(live.async_client())
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    await comm.receive_from(timeout=3)  # the state a connect sends
    await comm.send_to(text_data=f'{{"type": "sync", "turn": {turn.pk}}}')
    message = await comm.receive_from(timeout=3)
    assert message.startswith(f"<!--seq {turn.pk} 5 full-->")
    assert f'<div class="turn-continue" id="continue-{turn.pk}" hx-swap-oob="true">' in message
    assert 'data-testid="continue-button"' in message
    # Once a newer answer follows it (it was continued), a sync no longer offers it.
    await Turn.objects.acreate(chat=chat, status=Turn.Status.COMPLETED)
    await comm.send_to(text_data=f'{{"type": "sync", "turn": {turn.pk}}}')
    message = await comm.receive_from(timeout=3)
    assert f'<div class="turn-continue" id="continue-{turn.pk}" hx-swap-oob="true"></div>' in message
    await comm.disconnect()


async def test_a_finished_turn_is_final_on_the_page(user: Any) -> None:
    """Rendered from the database, a finished turn carries the final seq: the page asks no sync
    for it when a new exchange arrives, and drops any late fragment of it."""
    from asgiref.sync import sync_to_async

    from chat import presenters
    from chat.events import FINAL_SEQ

    chat = await Chat.objects.acreate(owner=user)
    done = await Turn.objects.acreate(chat=chat, status=Turn.Status.COMPLETED)
    waiting = await Turn.objects.acreate(chat=chat, status=Turn.Status.QUEUED)
    views, _ = await sync_to_async(presenters.turn_views)([done, waiting])
    assert views[done.pk]["seq"] == FINAL_SEQ and views[waiting.pk]["seq"] == 0


async def test_group_fragments_reach_the_socket(user: Any) -> None:
    from chat.events import send_fragment

    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    await send_fragment(chat.pk, 42, 3, '<div id="x" hx-swap-oob="true">hi</div>')
    assert await comm.receive_from(timeout=3) == '<!--seq 42 3--><div id="x" hx-swap-oob="true">hi</div>'
    await comm.disconnect()


async def _cookie(user: Any) -> bytes:
    from asgiref.sync import sync_to_async

    return await sync_to_async(session_cookie)(user)


async def test_idle_socket_stays_open_past_the_layers_blocking_timeout(user: Any) -> None:
    """An open chat with nothing happening must not be dropped (the layer blocks for 5 s)."""
    from chat.events import send_fragment

    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    assert await comm.receive_nothing(timeout=7, interval=0.5)
    await send_fragment(chat.pk, 1, 1, '<div id="x" hx-swap-oob="true">still here</div>')
    assert "still here" in await comm.receive_from(timeout=3)
    await comm.disconnect()


async def test_a_published_state_and_its_fragment_go_in_one_round_trip(user: Any, monkeypatch: Any) -> None:
    """The worker stores a turn's state and publishes its fragment in one Redis command (a
    script), on the channel channels-redis's pub/sub layer listens to: the socket gets the fragment, and
    the state read by a reconnecting page is already the one it goes with."""
    from channels.layers import get_channel_layer

    from chat.events import _pubsub_channel, group_name

    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    redis = live.async_client()
    commands: list[str] = []
    original, piped = redis.execute_command, redis_pipe.RedisPipe.execute

    async def recording(*args: Any, **options: Any) -> Any:
        commands.append(str(args[0]))
        return await original(*args, **options)

    async def recording_pipe(self: redis_pipe.RedisPipe, *args: Any) -> Any:
        commands.append(str(args[0]))
        return await piped(self, *args)

    redis.execute_command = recording  # type: ignore[method-assign]
    monkeypatch.setattr(redis_pipe.RedisPipe, "execute", recording_pipe)
    state = live.LiveTurn(turn.pk, chat.pk, steps=[live.LiveStep(0, text="Hello")])

    await state.publish(redis, '<div id="y" hx-swap-oob="true">Hello</div>')
    sent = list(commands)

    assert await comm.receive_from(timeout=3) == f'<!--seq {turn.pk} 1--><div id="y" hx-swap-oob="true">Hello</div>'
    stored = await live.LiveTurn.aload(redis, turn.pk)
    assert stored is not None and stored.seq == 1 and stored.steps[0].text == "Hello"
    if _pubsub_channel(get_channel_layer(), group_name(chat.pk)) is not None:
        assert sent == ["EVAL"]  # one script
    await comm.disconnect()


async def test_a_redis_that_refuses_scripts_gets_two_commands_and_loses_nothing(user: Any, monkeypatch: Any) -> None:
    from redis.exceptions import ResponseError

    from chat import events

    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    redis = live.async_client()
    original = redis.execute_command

    async def no_scripts(*args: Any, **options: Any) -> Any:
        if args[0] in ("EVALSHA", "EVAL"):
            raise ResponseError("ERR unknown command 'EVALSHA'")
        return await original(*args, **options)

    async def pipe_no_scripts(self: redis_pipe.RedisPipe, *args: Any) -> Any:
        raise ResponseError("ERR unknown command 'EVALSHA'")

    redis.execute_command = no_scripts  # type: ignore[method-assign]
    monkeypatch.setattr(redis_pipe.RedisPipe, "execute", pipe_no_scripts)
    state = live.LiveTurn(turn.pk, chat.pk, steps=[live.LiveStep(0, text="Still here")])
    try:
        await state.publish(redis, '<div id="z" hx-swap-oob="true">Still here</div>')
        assert "Still here" in await comm.receive_from(timeout=3)
        stored = await live.LiveTurn.aload(redis, turn.pk)
        assert stored is not None and stored.seq == 1
        assert not events._script.usable  # the next fragments go straight to two commands
        await state.publish(redis, '<div id="z" hx-swap-oob="true">Again</div>')
        assert "Again" in await comm.receive_from(timeout=3)
    finally:
        events._script.usable = True
        await comm.disconnect()


async def test_a_broken_pipelined_connection_hands_the_fragment_to_redis_py(user: Any, monkeypatch: Any) -> None:
    """The pipelined connection does not retry: when it fails, the fragment and its state go
    through redis-py's client (which does), and nothing is lost."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.RUNNING)
    redis = live.async_client()

    async def broken(self: redis_pipe.RedisPipe, *args: Any) -> Any:
        raise RedisConnectionError("Redis connection lost: reset by peer")

    monkeypatch.setattr(redis_pipe.RedisPipe, "execute", broken)
    state = live.LiveTurn(turn.pk, chat.pk, steps=[live.LiveStep(0, text="Through")])
    await state.publish(redis, '<div id="w" hx-swap-oob="true">Through</div>')
    assert "Through" in await comm.receive_from(timeout=3)
    stored = await live.LiveTurn.aload(redis, turn.pk)
    assert stored is not None and stored.seq == 1 and stored.steps[0].text == "Through"
    await comm.disconnect()


async def test_fragments_are_forwarded_without_a_trip_to_a_thread(user: Any, monkeypatch: Any) -> None:
    """Channels would close stale database connections (on a thread) before every message; a
    fragment touches no database, so it is forwarded straight from the loop."""
    import channels.consumer

    from chat.events import send_fragment

    chat = await Chat.objects.acreate(owner=user)
    comm = communicator(chat.pk, await _cookie(user))
    await comm.connect()
    upkeep: list[int] = []
    original = channels.consumer.aclose_old_connections

    async def counted() -> None:
        upkeep.append(1)
        await original()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    for seq in (1, 2, 3):
        await send_fragment(chat.pk, 7, seq, f'<div id="f{seq}" hx-swap-oob="true">{seq}</div>')
        assert f">{seq}</div>" in await comm.receive_from(timeout=3)
    assert upkeep == []
    await comm.send_to(text_data='{"type": "sync", "turn": 7}')  # other messages keep the upkeep
    await comm.receive_nothing(timeout=0.5)
    assert upkeep
    await comm.disconnect()
