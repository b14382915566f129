"""LOG_FORMAT=json: every line a JSON object, and a turn's records all carry its ids, from the
real worker; no message text or tool arguments at INFO."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from chat.models import Chat, Message, Turn
from chat.selection import default_selection
from core import logs
from tests.processes import BOOT_S, Processes, free_port, wait_until

SECRET_QUESTION = "What is 12*7? my-private-words"


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    processes.env["LOG_FORMAT"] = "json"
    processes.start_redis()
    yield processes
    processes.close()


def _lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text().splitlines():
        records.append(json.loads(line))  # every line, not only those that look like JSON
    return records


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_json_logs_carry_the_turn_through_the_worker(own: Processes, user: Any, demo_model: Any) -> None:
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools=default_selection())
    turn = Turn.objects.create(chat=chat, model=demo_model)
    Message.objects.create(chat=chat, turn=turn, role=Message.Role.USER, content=SECRET_QUESTION)
    own.worker()
    wait_until(own.worker_alive, BOOT_S, "the worker did not start")
    own.broker().send_task("chat.run_turn", args=[turn.pk])
    wait_until(lambda: not Turn.objects.get(pk=turn.pk).is_active, 60, "the turn did not finish")
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED

    def finished_logged() -> bool:
        return any(r["message"].startswith("Turn finished") for r in _lines(own.log("worker")))

    wait_until(finished_logged, 10, "the worker did not log the end of the turn")
    records = _lines(own.log("worker"))
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record)
    mine = [r for r in records if r.get("turn_id") == turn.pk]
    messages = [r["message"] for r in mine]
    assert messages[0] == "Turn started"
    assert any(m.startswith("Tool clock_math.") and ": success in " in m for m in messages), messages
    assert messages[-1].startswith("Turn finished: completed")
    for record in mine:
        assert record["chat_id"] == chat.pk and record["user_id"] == user.pk, record
    # What the user wrote and the tool's arguments stay out of the logs.
    text = own.log("worker").read_text()
    assert "my-private-words" not in text
    assert "12*7" not in text and "expression" not in text


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_json_logs_of_the_web_process_carry_the_request_id(own: Processes) -> None:
    port = free_port()
    own.web(port)
    response = httpx.get(f"http://127.0.0.1:{port}/no/such/page", headers={"X-Request-ID": "probe-4711"})
    assert response.status_code == 404
    assert response.headers["X-Request-ID"] == "probe-4711"

    def logged() -> list[dict[str, Any]]:
        return [r for r in _lines(own.log("web")) if r.get("request_id") == "probe-4711"]

    found = wait_until(logged, 10, "the 404 was not logged with its request id")
    assert found[0]["logger"] == "django.request" and found[0]["level"] == "WARNING"

    # The access log is records too, without query strings (a search's words are the reader's).
    httpx.get(f"http://127.0.0.1:{port}/login/?q=my-private-words&next=/")

    def accessed() -> list[dict[str, Any]]:
        return [r for r in _lines(own.log("web")) if r["logger"] == "tessera.access" and r.get("path") == "/login/"]

    (entry,) = wait_until(accessed, 10, "the request was not in the access log")
    assert entry["status"] == 200 and entry["method"] == "GET" and entry["message"] == "GET /login/ 200"
    everything = own.log("web").read_text() + (own.folder / "web.out").read_text()
    assert "my-private-words" not in everything
    # Probes that succeed are left out.
    assert not [r for r in _lines(own.log("web")) if r.get("path") == "/healthz"]


@pytest.mark.django_db
def test_a_plain_request_id_from_the_client_is_kept_and_anything_else_replaced(client: Client) -> None:
    assert client.get("/healthz", HTTP_X_REQUEST_ID="lb-1234.abc")["X-Request-ID"] == "lb-1234.abc"
    for hostile in ("x" * 65, "a b", "id\nInjected: 1", '"quoted"'):
        given = client.get("/healthz", HTTP_X_REQUEST_ID=hostile)["X-Request-ID"]
        assert given != hostile and len(given) == 32


def _record(message: str, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom with sk-proj-abcdefghijklmnopqrstuvwxyz")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.LogRecord("chat.worker.turns", logging.INFO, __file__, 1, message, None, exc_info)


def test_formatters_add_the_context_ids_and_the_traceback_is_redacted() -> None:
    from core.redact import RedactingFilter

    context, redacting = logs.ContextFilter(), RedactingFilter()
    with logs.turn_context(7, 3, 2):
        record = _record("Turn started", exc=True)
        context.filter(record)
        redacting.filter(record)
    data = json.loads(logs.JsonFormatter().format(record))
    assert data["turn_id"] == 7 and data["chat_id"] == 3 and data["user_id"] == 2
    assert data["level"] == "INFO" and data["logger"] == "chat.worker.turns" and data["message"] == "Turn started"
    assert "ValueError" in data["exc_info"] and "sk-proj-abc" not in data["exc_info"]
    text = logs.TextFormatter().format(record)
    assert text.splitlines()[0].endswith("Turn started [turn=7 chat=3 user=2]")
    # Outside a turn: no ids, and the text line is as it always was.
    plain = _record("Ready")
    context.filter(plain)
    assert "turn_id" not in json.loads(logs.JsonFormatter().format(plain))
    assert logs.TextFormatter().format(plain).endswith("chat.worker.turns: Ready")
