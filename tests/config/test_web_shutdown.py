"""SIGTERM to a real web process: its chat sockets are closed with 1012 ("service restart"), a
code the page reconnects on, and the process exits."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import websockets
from django.conf import settings
from django.test import Client

from chat.models import Chat
from tests.processes import Processes, free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_sigterm_closes_sockets_with_service_restart(tmp_path: Path, user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model)
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    processes = Processes(tmp_path, redis_url=settings.REDIS_URL)  # the session's Redis holds the session
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        web = processes.web(port)

        async def run() -> tuple[int | None, float]:
            async with websockets.connect(
                f"ws://127.0.0.1:{port}/ws/chats/{chat.pk}/", additional_headers={"Cookie": cookie, "Origin": base}
            ) as ws:
                await asyncio.sleep(0.3)  # connected and joined the chat's group
                web.send_signal(signal.SIGTERM)
                started = time.monotonic()
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    while True:
                        await asyncio.wait_for(ws.recv(), timeout=10)
                return closed.value.rcvd.code if closed.value.rcvd else None, time.monotonic() - started

        code, took = asyncio.run(run())
        assert code == 1012
        assert took < 5
        assert web.wait(timeout=15) == 0
    finally:
        processes.close()
