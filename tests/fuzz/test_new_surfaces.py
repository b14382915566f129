"""Hostile and careless requests to the automations, notifications, knowledge, memory, artifacts,
waiting messages and MCP Apps views: another user's object is a 404 exactly like a missing one,
malformed ids and bodies, wrong methods and hostile values are a clear 4xx (never a 500, never
a traceback in the log), and markup in names and texts is shown escaped."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import Group
from django.test import Client

from artifacts import store as artifact_store
from artifacts.models import Artifact
from automations import live, webhooks
from automations.models import Automation, AutomationRun
from chat import pending
from chat.models import Chat, PendingMessage, Turn
from config.asgi import application
from knowledge import ingest
from knowledge.models import Document, KnowledgeBase
from memory.models import Memory
from notifications.models import Notification
from notifications.service import fragment, notify

from .test_hostile_inputs import RAW_BODIES, VALUES

MARKUP = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def _no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage()[:200] for r in bad]


def _client(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _objects(owner: Any, demo_model: Any, name: str = "Thing") -> dict[str, int]:
    """One of each object the new surfaces act on, owned by `owner`."""
    key, secret = webhooks.new_credentials()
    automation = Automation.objects.create(
        owner=owner, name=name, prompt="Summarize", model=demo_model, trigger="webhook", webhook_key=key,
        webhook_secret=secret,
    )  # fmt: skip
    base = KnowledgeBase.objects.create(owner=owner, name=name)
    document, _ = ingest.add(base, f"{name}.md", b"# Heading\n\nSome text.")
    memory = Memory.objects.create(owner=owner, text=name)
    chat = Chat.objects.create(owner=owner, model=demo_model)
    artifact = artifact_store.create(owner_id=owner.pk, chat_id=chat.pk, title=name, kind="html", content="<p>x</p>")
    note = notify(owner.pk, "run_completed", name, name, "/automations/")
    turn = Turn.objects.create(chat=chat, status=Turn.Status.RUNNING)
    pending = PendingMessage.objects.create(chat=chat, kind=PendingMessage.Kind.QUEUED, content="later")
    return {
        "automation": automation.pk,
        "base": base.pk,
        "document": document.pk,
        "memory": memory.pk,
        "chat": chat.pk,
        "artifact": artifact.artifact.pk,
        "note": note.pk if note else 0,
        "turn": turn.pk,
        "pending": pending.pk,
    }


# URL → (method, the fields it reads)
OBJECT_URLS: dict[str, tuple[str, list[str]]] = {
    "/automations/{automation}/": ("GET", []),
    "/automations/{automation}/edit/": (
        "POST",
        ["name", "prompt", "schedule", "timezone", "trigger", "model", "agent"],
    ),
    "/automations/{automation}/run/": ("POST", []),
    "/automations/{automation}/rotate/": ("POST", []),
    "/automations/{automation}/delete/": ("POST", []),
    "/knowledge/{base}/": ("GET", []),
    "/knowledge/{base}/documents/": ("GET", []),
    "/knowledge/{base}/upload/": ("POST", ["files"]),
    "/knowledge/{base}/page/": ("POST", ["url"]),
    "/knowledge/{base}/resource/": ("POST", ["server", "uri"]),
    "/knowledge/{base}/refresh/": ("POST", []),
    "/knowledge/{base}/share/": ("POST", ["groups"]),
    "/knowledge/documents/{document}/": ("GET", []),
    "/knowledge/documents/{document}/delete/": ("POST", []),
    "/knowledge/{base}/delete/": ("POST", []),
    "/account/memory/{memory}/": ("POST", ["text"]),
    "/account/memory/{memory}/delete/": ("POST", []),
    "/chats/{chat}/artifacts/{artifact}/": ("GET", []),
    "/chats/{chat}/artifacts/{artifact}/document": ("GET", []),
    "/chats/{chat}/artifacts/{artifact}/download": ("GET", []),
    "/chats/{chat}/artifacts/{artifact}/versions": ("POST", ["content", "base"]),
    "/notifications/{note}/open/": ("POST", []),
    "/chats/{chat}/steer/": ("POST", ["content", "attachments"]),
    "/chats/{chat}/pending/{pending}/edit/": ("POST", ["content"]),
    "/chats/{chat}/pending/{pending}/cancel/": ("POST", []),
    "/chats/{chat}/pending/{pending}/send/": ("POST", []),
}
# Views without an object in their path → (method, fields)
PLAIN_URLS: dict[str, tuple[str, list[str]]] = {
    "/automations/": ("GET", []),
    "/automations/new/": ("POST", ["name", "prompt", "schedule", "timezone", "trigger", "model", "agent", "tools"]),
    "/automations/preview/": ("GET", ["schedule", "timezone"]),
    "/notifications/": ("GET", []),
    "/notifications/read-all/": ("POST", []),
    "/knowledge/": ("GET", []),
    "/knowledge/new/": ("POST", ["name", "description"]),
    "/account/memory/new/": ("POST", ["text"]),
    "/account/memory/switch/": ("POST", ["enabled"]),
    "/account/memory/export.json": ("GET", []),
    "/account/memory/export.md": ("GET", []),
}


def _send(client: Client, method: str, url: str, data: Any = None, **extra: Any) -> Any:
    if method == "GET":
        return client.get(url, data or {})
    return client.post(url, data if data is not None else {}, **extra)


@pytest.mark.django_db
def test_another_users_objects_are_404_like_missing_ones(
    user: Any, other_user: Any, demo_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    theirs = _objects(other_user, demo_model)
    attacker = _client(user)
    missing = dict.fromkeys(theirs, 999_999_999)
    for template, (method, fields) in OBJECT_URLS.items():
        for ids in (theirs, missing):
            response = _send(attacker, method, template.format(**ids), dict.fromkeys(fields, "x"))
            assert response.status_code == 404, (template, ids is theirs, response.status_code)
    # Nothing of theirs changed.
    assert Automation.objects.filter(pk=theirs["automation"]).exists()
    assert KnowledgeBase.objects.filter(pk=theirs["base"], groups=None).exists()
    assert Memory.objects.get(pk=theirs["memory"]).text == "Thing"
    assert not Notification.objects.get(pk=theirs["note"]).read
    assert PendingMessage.objects.filter(pk=theirs["pending"], content="later").exists()
    assert Artifact.objects.get(pk=theirs["artifact"]).versions.count() == 1
    _no_errors_logged(caplog)


@pytest.mark.django_db
def test_anonymous_wrong_method_and_malformed_ids(user: Any, demo_model: Any, caplog: pytest.LogCaptureFixture) -> None:
    mine = _objects(user, demo_model)
    anonymous = Client(raise_request_exception=False)
    owner = _client(user)
    for template, (method, _) in {**OBJECT_URLS, **PLAIN_URLS}.items():
        url = template.format(**mine)
        response = _send(anonymous, method, url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), (url, response.status_code)
        wrong = owner.put(url, b"x") if method == "POST" else owner.post(url)
        assert wrong.status_code == 405, (url, wrong.status_code)
        for bad in ("abc", "-1", "9" * 19, "1e400", "%00", "0x1"):
            bent = {name: bad for name in mine}
            if "{" in template:
                assert _send(owner, method, template.format(**bent)).status_code == 404, (template, bad)
    _no_errors_logged(caplog)


# One test per view: each is short, and a failure names its view.
FIELD_URLS = [t for t in {**PLAIN_URLS, **OBJECT_URLS} if not t.endswith("/delete/")]


@pytest.mark.django_db
@pytest.mark.timeout(300)  # the automation form: ~200 posts of its many fields, 25 s on a quiet machine
@pytest.mark.parametrize("template", FIELD_URLS)
def test_every_field_survives_hostile_values(
    user: Any, demo_model: Any, caplog: pytest.LogCaptureFixture, template: str
) -> None:
    Group.objects.create(name="Team").user_set.add(user)
    owner = _client(user)
    failures: list[tuple[str, str, int]] = []
    for method, fields in [{**PLAIN_URLS, **OBJECT_URLS}[template]]:
        mine = _objects(user, demo_model, name=f"Thing {template}")
        url = template.format(**mine)
        bodies: list[dict[str, Any]] = [{}]
        bodies += [{field: value} for field in fields for value in VALUES]
        bodies += [{field: [value, value]} for field in fields for value in VALUES[:6]]
        for body in bodies:
            response = _send(owner, method, url, body)
            if response.status_code >= 500:
                failures.append((url, str(body)[:80], response.status_code))
        if method == "POST":
            for raw, content_type in RAW_BODIES:
                response = owner.post(url, raw, content_type=content_type)
                if response.status_code >= 500:
                    failures.append((url, repr(raw[:30]), response.status_code))
        for query in ("?v=abc", "?v=99999999999", "?passage=1e400", "?passage=" + "9" * 5000, "?theme=%00"):
            if method == "GET" and owner.get(url + query).status_code >= 500:
                failures.append((url, query, 500))
    assert not failures, failures[:10]
    _no_errors_logged(caplog)


def _hook(user: Any, demo_model: Any) -> tuple[Automation, str]:
    key, secret = webhooks.new_credentials()
    automation = Automation.objects.create(
        owner=user, name="Hook", prompt="Triage", model=demo_model, trigger="webhook", webhook_key=key,
        webhook_secret=secret,
    )  # fmt: skip
    return automation, secret


STAMPS = ["", " ", "abc", "-1", "1e9", "²", "١٧٠٠٠٠٠٠٠٠", "9" * 5000, "0", "1.5", "\t123"]


@pytest.mark.django_db
def test_webhook_refuses_hostile_timestamps_and_signatures(
    user: Any, demo_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    automation, secret = _hook(user, demo_model)
    client = Client(raise_request_exception=False)
    url = f"/automations/hooks/{automation.webhook_key}/"
    for stamp in STAMPS:
        headers = {"X-Tessera-Timestamp": stamp, "X-Tessera-Signature": webhooks.sign(secret, stamp, b"{}")}
        response = client.post(url, b"{}", content_type="application/json", headers=headers)
        assert response.status_code in (400, 401), (stamp[:20], response.status_code)
    now = str(int(time.time()))
    wrong = webhooks.sign("whsec_other", now, b"{}")
    for signature in ("", "sha256=", "sha256=" + "0" * 64, "é" * 5000, "\x00", wrong):
        headers = {"X-Tessera-Timestamp": now, "X-Tessera-Signature": signature}
        response = client.post(url, b"{}", content_type="application/json", headers=headers)
        assert response.status_code in (400, 401), (signature[:20], response.status_code)
    for key in ("nope", "%00", "x" * 5000, "..", f"{automation.webhook_key}x"):
        assert client.post(f"/automations/hooks/{key}/", b"{}", content_type="application/json").status_code == 404
    assert client.get(url).status_code == 405
    big = b"x" * (settings.AUTOMATIONS_WEBHOOK_MAX_BYTES + 1)
    headers = {"X-Tessera-Timestamp": now, "X-Tessera-Signature": webhooks.sign(secret, now, big)}
    assert client.post(url, big, content_type="application/json", headers=headers).status_code == 413
    _no_errors_logged(caplog)


@pytest.mark.django_db
def test_markup_in_names_and_texts_is_escaped_everywhere(
    user: Any, demo_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _client(user)
    mine = _objects(user, demo_model, name=MARKUP)
    Document.objects.filter(pk=mine["document"]).update(title=MARKUP, reference=MARKUP)
    pages = [
        "/automations/",
        f"/automations/{mine['automation']}/",
        f"/automations/{mine['automation']}/edit/",
        "/notifications/",
        "/knowledge/",
        f"/knowledge/{mine['base']}/",
        f"/knowledge/{mine['base']}/documents/",
        f"/knowledge/documents/{mine['document']}/",
        "/account/",
        f"/chats/{mine['chat']}/artifacts/{mine['artifact']}/",
        f"/chats/{mine['chat']}/",
        "/",
    ]
    for page in pages:
        response = owner.get(page, follow=True)
        assert response.status_code == 200, page
        body = response.content.decode()
        assert "<script>alert(2)</script>" not in body and "<img src=x" not in body, page
    # What the sockets carry: the bell's fragment, an automation's runs, the waiting messages.
    run = AutomationRun.objects.create(automation_id=mine["automation"], error=MARKUP)
    PendingMessage.objects.filter(pk=mine["pending"]).update(content=MARKUP)
    fragments = [
        fragment(user.pk, Notification.objects.get(pk=mine["note"])),
        live.runs_html(mine["automation"], [run], oob=True),
        pending.box_html(Chat.objects.get(pk=mine["chat"])),
    ]
    for html in fragments:
        assert "<script>alert(2)</script>" not in html and "<img src=x" not in html, html[:300]
    _no_errors_logged(caplog)


async def _socket(user: Any, path: str) -> tuple[WebsocketCommunicator, bool, Any]:
    from asgiref.sync import sync_to_async

    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if user is not None:
        client = Client()
        await sync_to_async(client.force_login)(user)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()
        headers.append((b"cookie", cookie))
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await comm.connect()
    return comm, connected, code


@pytest.mark.django_db(transaction=True)
async def test_another_users_automation_and_chat_sockets_are_refused(
    user: Any, other_user: Any, demo_model: Any
) -> None:
    from asgiref.sync import sync_to_async

    theirs = await sync_to_async(_objects)(other_user, demo_model)
    for path in (f"/ws/automations/{theirs['automation']}/", f"/ws/chats/{theirs['chat']}/"):
        for who in (user, None):
            comm, connected, _ = await _socket(who, path)
            if connected:
                closed = await comm.receive_output(timeout=3)
                assert closed["type"] == "websocket.close" and closed.get("code", 0) >= 4000, (path, closed)
            await comm.disconnect()
    comm, connected, _ = await _socket(None, "/ws/notifications/")
    if connected:
        closed = await comm.receive_output(timeout=3)
        assert closed["type"] == "websocket.close", closed
    await comm.disconnect()


APP_BODIES = [b"", b"null", b"[]", b"{", b"\xff\xfe", b"[" * 100_000, b'{"a":' * 50_000, b'{"name": ["x"]}']


@pytest.mark.django_db
def test_mcp_app_requests_survive_hostile_bodies(
    user: Any, other_user: Any, demo_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from toolsets.models import ToolExecution

    chat = Chat.objects.create(owner=other_user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.COMPLETED)
    theirs = ToolExecution.objects.create(
        user=other_user, turn=turn, tool_call_id="c1", toolset="mcp_apps", tool="show", arguments={},
        status=ToolExecution.Status.SUCCESS, result={"content": []},
    )  # fmt: skip
    attacker = _client(user)
    for action in ("call", "read", "context"):
        for execution in (theirs.pk, 999_999_999):
            for body in APP_BODIES:
                response = attacker.post(f"/apps/{execution}/{action}/", body, content_type="application/json")
                assert response.status_code in (400, 404), (action, body[:20], response.status_code)
            ok = attacker.post(f"/apps/{execution}/{action}/", b'{"name": "show", "uri": "ui://x"}', "application/json")
            assert ok.status_code == 404, (action, ok.status_code)
        assert attacker.get(f"/apps/{theirs.pk}/{action}/").status_code == 405
    assert attacker.get(f"/apps/{theirs.pk}/").status_code == 404
    assert attacker.get(f"/apps/chat/{chat.pk}/mcp_apps__show/").status_code == 404
    anonymous = Client(raise_request_exception=False)
    assert anonymous.post(f"/apps/{theirs.pk}/call/", b"{}", "application/json").status_code == 302
    _no_errors_logged(caplog)


@pytest.mark.django_db
def test_control_characters_never_reach_the_database(user: Any) -> None:
    # PostgreSQL refuses NUL in text (a 500 there); a name is one line of text anyway.
    owner = _client(user)
    response = owner.post("/knowledge/new/", {"name": "Hand\x00book\x07", "description": "a\x00b\r\nc"})
    assert response.status_code == 302
    assert list(KnowledgeBase.objects.values_list("name", "description")) == [("Hand book", "a b c")]
    assert owner.post("/knowledge/new/", {"name": "\x00\x01"}).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_tools_never_reach_another_users_objects(user: Any, other_user: Any, demo_model: Any) -> None:
    from asgiref.sync import async_to_sync

    from artifacts.tools import read_artifact, update_artifact
    from knowledge import ingest as knowledge_ingest
    from knowledge.tools import read_knowledge
    from memory.tools import forget_memory, update_memory
    from toolsets.base import ToolContext, ToolFailure

    theirs = _objects(other_user, demo_model)
    knowledge_ingest.index(theirs["document"])
    mine = Chat.objects.create(owner=user, model=demo_model)
    ctx = ToolContext(user_id=user.pk, chat_id=mine.pk)
    with pytest.raises(ToolFailure):
        forget_memory.func(ctx, theirs["memory"])
    with pytest.raises(ToolFailure):
        update_memory.func(ctx, theirs["memory"], "Mine now")
    assert Memory.objects.get(pk=theirs["memory"]).text == "Thing"
    for handle in (f"d{theirs['document']}", "p1", "d" + "9" * 18, "d-1", "x", "", "p٣"):
        with pytest.raises((LookupError, ValueError)):
            read_knowledge.func(ctx, handle)
    for chat_id in (mine.pk, theirs["chat"]):
        with pytest.raises(ToolFailure):
            async_to_sync(read_artifact.func)(ToolContext(user_id=user.pk, chat_id=chat_id), theirs["artifact"])
        with pytest.raises(ToolFailure):
            async_to_sync(update_artifact.func)(
                ToolContext(user_id=user.pk, chat_id=chat_id), theirs["artifact"], content="<p>mine</p>"
            )
    assert Artifact.objects.get(pk=theirs["artifact"]).versions.count() == 1


@pytest.mark.django_db
def test_a_nul_in_a_webhook_key_or_share_token_is_a_404(user: Any, caplog: pytest.LogCaptureFixture) -> None:
    # PostgreSQL refuses NUL in a query (a 500 there): such a key never reaches the database.
    from django.urls import resolve
    from django.urls.exceptions import Resolver404

    for path in ("/automations/hooks/\x00/", "/s/a\x00b/", "/s/\x00/artifacts/1/", "/s/\x00/apps/1/"):
        with pytest.raises(Resolver404):
            resolve(path)
    assert Client().post("/automations/hooks/%00/", b"{}", content_type="application/json").status_code == 404
    _no_errors_logged(caplog)
