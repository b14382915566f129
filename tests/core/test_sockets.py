"""The listen-only sockets (core/sockets.py): a visitor who is not signed in is accepted and
closed with 4401 on each of them, so htmx stops retrying, and joins no group."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator

from config.asgi import application
from core.sockets import CLOSE_UNAUTHENTICATED

PATHS = ["/ws/notifications/", "/ws/automations/", "/ws/automations/?all=1", "/ws/automations/1/"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", PATHS)
def test_a_visitor_not_signed_in_is_closed_with_4401(path: str) -> None:
    async def attempt() -> object:
        headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
        socket = WebsocketCommunicator(application, path, headers=headers)
        assert (await socket.connect())[0]
        closed = await socket.receive_output(timeout=5)
        await socket.disconnect()
        return closed

    assert asyncio.run(attempt()) == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
