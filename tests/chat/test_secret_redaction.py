"""A provider that echoes the API key in its error never gets the key shown to the user, stored
in the database or Redis, or written to the log."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client

from chat import live
from chat.models import Chat, LLMModel, Message, Turn
from chat.worker.turns import run_turn

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "zz-live-provider-key-5b1e8c0d9f2a"


class EchoingProvider(BaseHTTPRequestHandler):
    """Answers every completion with a 400 that quotes the caller's key, as some providers do."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Invalid request for api key {key}", "type": "invalid_request"}})
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_provider_error_quoting_the_key_is_redacted_everywhere(
    provider: str, user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    model = LLMModel.objects.create(name="Echo", model="openai/echo", api_base=provider, api_key=KEY)
    chat = Chat.objects.create(owner=user, model=model)
    turn = Turn.objects.create(chat=chat, model=model)
    Message.objects.create(chat=chat, turn=turn, role="user", content="hello")

    with caplog.at_level(logging.DEBUG):
        asyncio.run(run_turn(turn.pk))

    turn.refresh_from_db()
    assert turn.status == Turn.Status.FAILED
    assert "Invalid request for api key" in turn.error, turn.error  # the useful part stays
    assert KEY not in turn.error and KEY[-6:] not in turn.error
    state = redis.from_url(settings.REDIS_URL).get(live.key(turn.pk, "live")) or b""
    assert b"Invalid request" in state and KEY.encode() not in state
    client = Client()
    client.force_login(user)
    page = client.get(f"/chats/{chat.pk}/").content.decode()
    assert "Invalid request for api key" in page and KEY not in page
    # Whatever the log handler writes goes through the same redaction.
    from core.redact import RedactingFilter

    console = [h for h in logging.getLogger().handlers if any(isinstance(f, RedactingFilter) for f in h.filters)]
    assert console, "the configured log handler must redact"
    written = []
    for record in caplog.records:
        RedactingFilter().filter(record)
        written.append(logging.Formatter().format(record))
    assert KEY not in "\n".join(written)
