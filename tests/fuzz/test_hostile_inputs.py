"""Hostile input on every POST endpoint, the execution API and the chat socket: never a 500,
never a traceback in the log, and the app still works afterwards.

A table of values known to break parsers and databases (NUL bytes, lone surrogates, huge and
non-finite numbers, deep nesting, oversized text, wrong types), crossed with every field each
endpoint reads, plus raw bodies that are not even valid form or JSON encoding.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from chat.models import Chat, LLMModel, Turn
from config.asgi import application
from hub.models import ApiToken

VALUES = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "abc",
    "-1",
    "0",
    "1e400",
    "Infinity",
    "NaN",
    "99999999999999999999999999999",
    "9" * 5000,
    "x" * 100_001,
    "<script>alert(1)</script>",
    "'; DROP TABLE chat_chat; --",
    "../../../etc/passwd",
    "%00%ff",
    "[" * 10_000,
    '{"a":' * 5_000,
    "\u202egnp.exe",
    "🙂" * 1000,
    "on",
    "true",
    "clock_math:calculate",
    "nope:nothing",
    ":",
]
# Bodies that are not valid form encoding or not valid UTF-8 at all.
RAW_BODIES = [
    (b"content=%FF%FE%00&model=%ED%A0%80", "application/x-www-form-urlencoded"),
    (b"\xff\xfe\xfd", "application/x-www-form-urlencoded"),
    (b"--x\r\nContent-Disposition: form-data; name=\r\n\r\n", "multipart/form-data; boundary=x"),
    (b"{" * 1000, "application/json"),
]

# endpoint → the fields it reads (as the page would send them)
CHAT_POSTS = {
    "/chats/new/": ["content", "model"],
    "/chats/{chat}/messages/": ["content"],
    "/chats/{chat}/stop/": [],
    "/chats/{chat}/rename/": ["title"],
    "/chats/{chat}/tools/": ["tools"],
    "/chats/{chat}/settings/": ["model", "limit_tool_iterations", "max_tool_iterations"],
    "/chats/tools/": ["tools"],
    "/toolsets/clock_math/enabled/": ["enabled"],
    "/toolsets/exa/key/": ["api_key", "clear"],
    "/toolsets/workspace/setup/": [],
    "/account/tokens/": ["name"],
    "/account/tokens/{token}/revoke/": [],
}
PATH_VALUES = ["0", "99999999999999999999999999", "-1", "abc", "%00", "1e400"]


def _no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage()[:200] for r in bad]


@pytest.fixture
def owner(user: Any, demo_model: LLMModel) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_every_post_field_survives_hostile_values(owner: Client, user: Any, caplog: pytest.LogCaptureFixture) -> None:
    chat = Chat.objects.create(owner=user)
    token, _ = ApiToken.issue(user, "fuzz")
    failures = []
    for template, fields in CHAT_POSTS.items():
        url = template.format(chat=chat.pk, token=token.pk)
        bodies: list[dict[str, Any]] = [{}]
        bodies += [{field: value} for field in fields for value in VALUES]
        bodies += [{field: [value, value]} for field in fields for value in VALUES[:6]]
        for body in bodies:
            response = owner.post(url, body)
            if response.status_code >= 500:
                failures.append((url, str(body)[:80], response.status_code))
        for raw, content_type in RAW_BODIES:
            response = owner.post(url, raw, content_type=content_type)
            if response.status_code >= 500:
                failures.append((url, repr(raw[:30]), response.status_code))
        # A running turn would make every later send a 409: let each endpoint start clean.
        Turn.objects.filter(chat=chat).update(status=Turn.Status.COMPLETED)
    assert not failures, failures[:10]
    _no_errors_logged(caplog)
    # Still works: the page renders and a real message is accepted.
    assert owner.get(f"/chats/{chat.pk}/").status_code == 200
    assert owner.post(f"/chats/{chat.pk}/messages/", {"content": "What is 1+1?"}).status_code == 200


@pytest.mark.django_db
def test_ids_in_paths_are_404_never_500(owner: Client, caplog: pytest.LogCaptureFixture) -> None:
    for value in PATH_VALUES:
        for template in ("/chats/{}/", "/chats/{}/earlier/?before=1", "/toolsets/executions/{}/"):
            assert owner.get(template.format(value)).status_code in (400, 404), (template, value)
        for template in ("/chats/{}/messages/", "/chats/{}/stop/", "/chats/{}/delete/", "/account/tokens/{}/revoke/"):
            assert owner.post(template.format(value), {"content": "x"}).status_code == 404, (template, value)
    for before in ["", "abc", "1e400", "9" * 40, "-5", "\x00"]:
        assert owner.get(f"/chats/1/earlier/?before={before}").status_code in (400, 404)
    _no_errors_logged(caplog)


def _deep(levels: int, opener: str = "[", closer: str = "]") -> str:
    return opener * levels + closer * levels


API_BODIES = [
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"{",
    b"\xff\xfe",
    _deep(3_000).encode(),
    _deep(100_000).encode(),
    ('{"params": ' + _deep(3_000, '{"a":', "}") + "}").encode(),
    b'{"params": {"expression": 1e400}}',
    b'{"params": {"expression": NaN}}',
    b'{"params": {"expression": "' + b"9" * 5000 + b'"}}',
    b'{"params": [1, 2]}',
    b'{"params": {"expression": "\\ud800"}}',
    b'{"tool_call_id": {"a": 1}, "params": {}}',
    b'{"tool_call_id": "a\\u0000b", "params": {}}',
    b'{"tool_call_id": "' + b"x" * 10_000 + b'", "params": {}}',
    b'{"params": {"expression": "' + b"1+" * 50_000 + b'1"}}',
    b'{"params": {"expression": "9**9**9**9"}}',
    b'{"params": {"expression": "\\u0000"}}',
    b'{"params": {"unknown": true}}',
    b"x" * 1_100_000,
]


@pytest.mark.django_db(transaction=True)
def test_execution_api_survives_hostile_bodies(user: Any, caplog: pytest.LogCaptureFixture, settings: Any) -> None:
    settings.TOKEN_FREE_FAILURES = 100  # malformed headers are bad tokens; the throttle is tested elsewhere
    _, secret = ApiToken.issue(user, "fuzz")
    client = Client(raise_request_exception=False)
    headers = {"Authorization": f"Bearer {secret}"}
    for path in ("/toolsets/clock_math/execute/calculate", "/toolsets/workspace/execute/create_task"):
        for body in API_BODIES:
            response = client.post(path, body, content_type="application/json", headers=headers)
            assert response.status_code < 500 or response.status_code in (502, 504), (body[:60], response.status_code)
            assert response["Content-Type"] == "application/json"
            assert "error" in response.json() or "result" in response.json()
    for header in ("Bearer", "Bearer \x00", "Basic abc", "Bearer " + "x" * 10_000, "Bearer tsk_\u00ff"):
        response = client.post(
            "/toolsets/clock_math/execute/calculate",
            b"{}",
            content_type="application/json",
            headers={"Authorization": header},
        )
        assert response.status_code == 401
    _no_errors_logged(caplog)
    ok = client.post(
        "/toolsets/clock_math/execute/calculate",
        json.dumps({"params": {"expression": "6*7"}}),
        content_type="application/json",
        headers=headers,
    )
    assert ok.status_code == 200 and ok.json()["result"]["result"] == 42


FRAMES = [
    '{"type": "sync", "turn": 1e400}',
    '{"type": "sync", "turn": -1e400}',
    '{"type": "sync", "turn": Infinity}',
    '{"type": "sync", "turn": NaN}',
    "[" * 100_000,
    '{"a":' * 50_000,
    '{"type": "sync", "turn": "' + "9" * 5000 + '"}',
    '{"type": "sync", "turn": ' + "9" * 5000 + "}",
    '{"type": "sync", "turn": 99999999999999999999999}',
    '{"type": "sync", "turn": -1}',
    '{"type": "sync", "turn": true}',
    '{"type": "sync", "turn": [1]}',
    '{"type": "sync", "turn": {"a": 1}}',
    '{"type": "sync", "turn": "1\\u0000"}',
    '{"type": "sync", "turn": "\\ud800"}',
    '{"type": ["sync"], "turn": 1}',
    '{"type": "sync"}',
    "[]",
    "null",
    '"sync"',
    "not json",
    " ",
    "x" * 900_000,
]


@pytest.mark.django_db(transaction=True)
async def test_socket_keeps_running_after_hostile_frames(user: Any, caplog: pytest.LogCaptureFixture) -> None:
    from asgiref.sync import sync_to_async

    chat = await Chat.objects.acreate(owner=user)
    turn = await Turn.objects.acreate(chat=chat, status=Turn.Status.COMPLETED)
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()
    comm = WebsocketCommunicator(
        application,
        f"/ws/chats/{chat.pk}/",
        headers=[(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)],
    )
    connected, _ = await comm.connect()
    assert connected
    for frame in FRAMES:
        await comm.send_to(text_data=frame)
        assert await comm.receive_nothing(timeout=0.05), frame[:60]
    await comm.send_to(bytes_data=b"\xff\x00")
    assert await comm.receive_nothing(timeout=0.05)
    # Still the same socket, still answering a proper request.
    await comm.send_to(text_data=json.dumps({"type": "sync", "turn": str(turn.pk)}))
    reply = await comm.receive_from(timeout=3)
    assert reply.startswith(f"<!--seq {turn.pk} ")
    await comm.disconnect()
    _no_errors_logged(caplog)
