"""Artifacts: the tools make and revise versions within their chat's limits; the panel, document
and download answer the chat's owner only (a share: its snapshot, display-only); a user's edit
is a version of its own the model reads back; the export carries them."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from artifacts import render, store, tools
from artifacts.models import Artifact, ArtifactVersion
from chat import export
from chat.models import Chat, ChatShare, Turn
from toolsets.base import ToolContext, ToolFailure
from toolsets.mcp import app_sandbox

pytestmark = pytest.mark.django_db(transaction=True)
PAGE = "<!doctype html><html><body><h1>Launch</h1><p>Hello</p></body></html>"


@pytest.fixture
def chat(user: Any) -> Chat:
    return Chat.objects.create(owner=user, title="Launch")


def _call(tool: Any, ctx: ToolContext, **arguments: Any) -> Any:
    return asyncio.run(tool.func(ctx, **arguments))


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_create_update_by_passage_and_read_make_versions(chat: Chat, user: Any) -> None:
    ctx = ToolContext(user_id=user.pk, chat_id=chat.pk)
    made = _call(tools.create_artifact, ctx, title="Launch page", kind="html", content=PAGE)
    assert made["version"] == 1 and made["kind"] == "html"
    changed = _call(tools.update_artifact, ctx, artifact_id=made["artifact_id"], old_text="Hello", new_text="Hi all")
    assert changed["version"] == 2
    read = _call(tools.read_artifact, ctx, artifact_id=made["artifact_id"])
    assert "Hi all" in read["content"] and read["version"] == 2
    assert [v.author for v in ArtifactVersion.objects.order_by("number")] == ["agent", "agent"]
    assert "version 2" in tools._model_text(changed)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"old_text": "absent", "new_text": "x"}, "does not occur"),
        ({"old_text": "<", "new_text": "x"}, "occurs"),
        ({}, "Give either"),
        ({"content": "x" * 2_000_000}, "longer than"),
    ],
)
def test_bad_edits_are_refused_with_a_reason_the_model_can_use(
    chat: Chat, user: Any, arguments: dict[str, Any], message: str
) -> None:
    ctx = ToolContext(user_id=user.pk, chat_id=chat.pk)
    made = _call(tools.create_artifact, ctx, title="Page", kind="html", content=PAGE)
    with pytest.raises(ToolFailure, match=message):
        _call(tools.update_artifact, ctx, artifact_id=made["artifact_id"], **arguments)
    assert ArtifactVersion.objects.count() == 1


def test_another_chats_artifact_is_not_found_by_the_tools(chat: Chat, user: Any, other_user: Any) -> None:
    made = _call(
        tools.create_artifact, ToolContext(user_id=user.pk, chat_id=chat.pk), title="T", kind="csv", content="a,b\n1,2"
    )
    theirs = Chat.objects.create(owner=other_user)
    with pytest.raises(ToolFailure, match="no artifact"):
        _call(
            tools.read_artifact, ToolContext(user_id=other_user.pk, chat_id=theirs.pk), artifact_id=made["artifact_id"]
        )
    with pytest.raises(ToolFailure, match="Unknown kind"):
        _call(tools.create_artifact, ToolContext(user_id=user.pk, chat_id=chat.pk), title="T", kind="exe", content="x")
    with pytest.raises(ToolFailure, match="from a conversation"):
        _call(tools.read_artifact, ToolContext(user_id=user.pk), artifact_id=made["artifact_id"])


def test_owner_edits_switch_versions_and_download(chat: Chat, user: Any, other_user: Any) -> None:
    change = store.create(owner_id=user.pk, chat_id=chat.pk, title="Launch", kind="html", content=PAGE)
    base = f"/chats/{chat.pk}/artifacts/{change.artifact.pk}/"
    client = _client(user)
    page = client.get(base, HTTP_HOST="127.0.0.1:8000")
    # Framed from an origin of Tessera's own documents, never the page's (nor a server's).
    origin = f"http://{app_sandbox.label('')}.localhost:8000"
    assert page.status_code == 200 and f'data-sandbox-origin="{origin}"'.encode() in page.content
    saved = client.post(base + "versions", {"content": PAGE.replace("Hello", "Edited by me"), "base": "1"})
    assert saved.status_code == 200 and b"Version 2 \xc2\xb7 You" in saved.content
    stale = client.post(base + "versions", {"content": "<p>late</p>", "base": "1"})
    assert stale.status_code == 400 and b"was made while you edited" in stale.content and b"late" in stale.content
    assert client.post(base + "versions", {"content": "", "base": "2"}).status_code == 400
    assert client.post(base + "versions", {"content": "x", "base": "two"}).status_code == 400
    first = client.get(base + "document?v=1").json()
    assert "Hello" in first["html"] and first["mermaid"] is False
    assert client.get(base + "document?v=9").status_code == 404
    assert client.get(base + "document?v=abc").status_code == 404
    download = client.get(base + "download")
    assert (
        download["Content-Disposition"].startswith("attachment;")
        and "Launch-v2.html" in download["Content-Disposition"]
    )
    assert download["Content-Security-Policy"].startswith("sandbox") and b"Edited by me" in download.content
    read = _call(tools.read_artifact, ToolContext(user_id=user.pk, chat_id=chat.pk), artifact_id=change.artifact.pk)
    assert read["author"] == "the user" and "Edited by me" in read["content"]
    stranger = _client(other_user)
    for url in (base, base + "document", base + "download"):
        assert stranger.get(url).status_code == 404
    assert stranger.post(base + "versions", {"content": "x", "base": "2"}).status_code == 404
    assert Client().get(base).status_code == 302


def test_a_share_shows_its_snapshot_display_only(chat: Chat, user: Any, other_user: Any) -> None:
    turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    change = store.create(
        owner_id=user.pk, chat_id=chat.pk, title="Launch", kind="markdown", content="# Hi", turn_id=turn.pk
    )
    share = ChatShare.objects.create(chat=chat, token="t" * 32, turn_ids=[turn.pk])
    ArtifactVersion.objects.filter(pk=change.version.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    store.revise(change.artifact, content="# Later", author="agent", turn_id=turn.pk + 100)
    base = f"/s/{share.token}/artifacts/{change.artifact.pk}/"
    viewer = _client(other_user)
    panel = viewer.get(base)
    assert panel.status_code == 200 and b"data-artifact-edit" not in panel.content and b"Version 2" not in panel.content
    assert "<h1>Hi</h1>" in viewer.get(base + "document").json()["html"]
    assert viewer.get(base + "download?v=2").status_code == 404
    assert (
        viewer.post(
            f"/chats/{chat.pk}/artifacts/{change.artifact.pk}/versions", {"content": "x", "base": "2"}
        ).status_code
        == 404
    )
    assert Client().get(base).status_code == 404
    assert viewer.get(f"/s/{'x' * 32}/artifacts/{change.artifact.pk}/").status_code == 404


def test_documents_escape_what_is_not_html() -> None:
    artifact = Artifact(kind="csv", title="t")
    table = render.document(artifact, 'name,note\n"<b>x</b>",<script>alert(1)</script>\n')
    assert "&lt;script&gt;" in table and "<script>alert" not in table
    artifact.kind = "markdown"
    assert "<script>" not in render.document(artifact, "# T\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>")
    artifact.kind = "mermaid"
    diagram = render.document(artifact, "graph TD; A-->B</pre><script>alert(1)</script>")
    assert "</pre><script>alert" not in diagram and render.MERMAID_SLOT in diagram
    artifact.kind, artifact.language = "code", "python"
    assert render.extension(artifact) == "py"
    artifact.language = "no-such-language"
    assert render.extension(artifact) == "txt"


def test_export_carries_every_version(chat: Chat, user: Any) -> None:
    change = store.create(
        owner_id=user.pk, chat_id=chat.pk, title="Plan", kind="code", content="print(1)\n", language="python"
    )
    store.revise(change.artifact, content="print(2)\n", author="user")
    data = json.loads(export.as_json(chat, []))
    assert [v["content"] for v in data["artifacts"][0]["versions"]] == ["print(1)\n", "print(2)\n"]
    text = export.as_markdown(chat, [])
    assert "## Artifacts" in text and "```python\nprint(2)\n```" in text and "by you" in text


def test_per_chat_limit(chat: Chat, user: Any, settings: Any) -> None:
    settings.ARTIFACTS_PER_CHAT = 1
    store.create(owner_id=user.pk, chat_id=chat.pk, title="One", kind="svg", content="<svg/>")
    with pytest.raises(store.Refused, match="already holds"):
        store.create(owner_id=user.pk, chat_id=chat.pk, title="Two", kind="svg", content="<svg/>")
