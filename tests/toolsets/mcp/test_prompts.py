"""Prompts as slash commands and resources as context, server side, against real servers: the
SDK test server (`prompts_server.py`, both eras) and npm `@modelcontextprotocol/server-everything`
over stdio. The views are the chat owner's, for servers the chat selected and the user may use."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from chat.models import Chat, Message, Turn
from tests.stdio_servers import forked
from toolsets.files.models import Attachment
from toolsets.models import ToolsetConfig

from .conftest import Restartable, register

PROMPT_SERVER = Path(__file__).with_name("prompts_server.py")
EVERYTHING = Path(__file__).resolve().parents[3] / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def prompt_server(transactional_db: Any) -> Any:
    return register(name="Prompt server", slug="ps", transport="stdio", **forked(PROMPT_SERVER))


def _chat(owner: Any, *toolsets: str) -> Chat:
    return Chat.objects.create(owner=owner, enabled_tools={t: ["x"] for t in toolsets})


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_menu_lists_the_selected_servers_prompts_filtered_as_typed(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    client = _client(user)
    page = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'role="listbox"' in body and "/review" in body and "/picture" in body
    narrowed = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/?q=rev").content.decode()
    assert "/review" in narrowed and "/picture" not in narrowed
    nothing = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/?q=zzz").content.decode()
    assert "No prompt matches" in nothing


def test_a_chat_that_did_not_select_the_server_sees_none_of_its_prompts(prompt_server: Any, user: Any) -> None:
    chat = _chat(user)
    client = _client(user)
    body = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
    assert "/review" not in body
    assert client.get(f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/?name=review").status_code == 404


def test_another_users_chat_and_a_server_kept_from_the_user_are_not_found(
    prompt_server: Any, user: Any, other_user: Any
) -> None:
    chat = _chat(user, "mcp_ps")
    intruder = _client(other_user)
    assert intruder.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").status_code == 404
    assert intruder.post(f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/use/", {"name": "review"}).status_code == 404
    assert intruder.post(f"/toolsets/mcp/chats/{chat.pk}/ps/attach/", {"uri": "notes://today"}).status_code == 404
    # The admin lets only a group use the server: the owner, not in it, loses it too.
    config = ToolsetConfig.objects.create(toolset_id="mcp_ps")
    config.groups.add(Group.objects.create(name="staff"))
    owner = _client(user)
    assert "/review" not in owner.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
    assert owner.get(f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/?name=review").status_code == 404
    assert owner.post(f"/toolsets/mcp/chats/{chat.pk}/ps/attach/", {"uri": "notes://today"}).status_code == 404


def test_argument_suggestions_come_from_the_servers_completion(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    client = _client(user)
    form = client.get(f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/?name=review").content.decode()
    assert 'name="arg.language"' in form and "required" in form
    url = f"/toolsets/mcp/chats/{chat.pk}/ps/complete/"
    found = client.get(url, {"prompt": "review", "argument": "language", "value": "p"}).content.decode()
    assert 'value="python"' in found and 'value="php"' in found and "rust" not in found
    # A template's variable, narrowed by the value already given for another one.
    city = client.get(
        url, {"template": "weather://{country}/{city}", "argument": "city", "value": "", "ctx.country": "de"}
    ).content.decode()
    assert 'value="berlin"' in city and "paris" not in city
    assert client.get(url, {"prompt": "review", "argument": "nope", "value": ""}).status_code == 400
    assert client.get(url, {"argument": "language"}).status_code == 400


def test_a_prompt_with_a_missing_argument_is_a_clear_400(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    answer = _client(user).post(f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/use/", {"name": "review"})
    assert answer.status_code == 400
    body = answer.json()
    assert "Language is required" in body["form"] or "language is required" in body["form"]
    assert not Turn.objects.filter(chat=chat).exists()


def test_a_single_question_prompt_goes_to_the_composer(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    answer = _client(user).post(
        f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/use/", {"name": "review", "arg.language": "rust"}
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["draft"] == "Review this rust code: <b>not markup</b>."
    assert body["html"] == "" and body["files"] == []


def test_an_answered_prompt_becomes_exchanges_and_its_image_and_resource_files(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    client = _client(user)
    answer = client.post(f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/use/", {"name": "picture"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    (turn,) = Turn.objects.filter(chat=chat)
    assert turn.status == Turn.Status.COMPLETED
    roles = list(Message.objects.filter(turn=turn).values_list("role", "content"))
    assert roles[0] == ("user", "Is this an example?")
    assert Message.objects.get(turn=turn, role="user").metadata == {"mcp_prompt": {"server": "ps", "prompt": "picture"}}
    assert roles[1][0] == "assistant" and "it is." in roles[1][1]
    # The server's markup is escaped or sanitized on the page, never run.
    assert "<script>alert(1)" not in body["html"] and "it is." in body["html"]
    assert body["draft"] == "What colour is this pixel?"
    kinds = sorted(f["kind"] for f in body["files"])
    assert kinds == ["image", "text"]
    stored = Attachment.objects.filter(owner=user, message__isnull=True)
    assert stored.count() == 2
    # Sending the draft with the chips claims the files like uploads.
    ids = [str(f["id"]) for f in body["files"]]
    Attachment.objects.filter(pk__in=ids).update(status=Attachment.Status.READY)
    sent = client.post(f"/chats/{chat.pk}/messages/", {"content": body["draft"], "attachments": ids})
    assert sent.status_code == 200
    question = Message.objects.filter(chat=chat, role="user").last()
    assert question is not None and set(question.files.values_list("pk", flat=True)) == {int(i) for i in ids}
    # The transcript the model gets: the example exchange in its roles, then the question.
    from chat.worker import turn_store

    transcript = turn_store.transcript(chat.pk, vision=True)
    assert [m["role"] for m in transcript] == ["user", "assistant", "user"]
    assert any(p.get("type") == "image_url" for p in transcript[-1]["content"] if isinstance(p, dict))


def test_resources_and_templates_are_listed_and_attached_as_files(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    client = _client(user)
    picker = client.get(f"/toolsets/mcp/chats/{chat.pk}/resources/").content.decode()
    assert "notes://today" in picker and "weather://{country}/{city}" in picker
    attach = f"/toolsets/mcp/chats/{chat.pk}/ps/attach/"
    text = client.post(attach, {"uri": "notes://today"})
    assert text.status_code == 201
    (file,) = text.json()["files"]
    stored = Attachment.objects.get(pk=file["id"], owner=user)
    assert stored.file.read() == b"Buy <b>milk</b>."
    image = client.post(attach, {"uri": "images://pixel"}).json()["files"][0]
    assert image["kind"] == "image"
    templated = client.post(attach, {"template": "weather://{country}/{city}", "var.country": "fr", "var.city": "lyon"})
    assert templated.status_code == 201
    assert Attachment.objects.get(pk=templated.json()["files"][0]["id"]).file.read() == b"Sunny in lyon (fr)."


def test_bad_resource_requests_are_clear_4xx_and_store_nothing(prompt_server: Any, user: Any) -> None:
    chat = _chat(user, "mcp_ps")
    client = _client(user)
    attach = f"/toolsets/mcp/chats/{chat.pk}/ps/attach/"
    assert client.post(attach, {"uri": "x" * 3000}).status_code == 400
    assert client.post(attach, {"uri": "no scheme"}).status_code == 400
    assert client.post(attach, {"uri": "notes://elsewhere"}).status_code == 404  # not listed
    missing = client.post(attach, {"template": "weather://{country}/{city}", "var.country": "fr"})
    assert missing.status_code == 400 and "city" in missing.json()["fields"]
    assert client.post(attach, {"template": "nope://{x}", "var.x": "1"}).status_code == 404
    from toolsets.files.models import FileLimits

    FileLimits.objects.update_or_create(pk=1, defaults={"max_file_mb": 1})
    from django.core.cache import cache

    cache.delete(FileLimits.CACHE_KEY)
    big = client.post(attach, {"uri": "big://blob"})
    assert big.status_code == 413 and "1 MB" in big.json()["error"]
    assert not Attachment.objects.filter(owner=user).exists()


@pytest.fixture
def legacy_prompt_server(transactional_db: Any) -> Any:
    server = Restartable(PROMPT_SERVER, "http", "{port}", env={"MCP_LEGACY_ONLY": "1"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("legacy", [False, True], ids=["2026", "handshake"])
def test_prompts_and_resources_work_in_both_eras_over_http(transactional_db: Any, user: Any, legacy: bool) -> None:
    env = {"MCP_LEGACY_ONLY": "1"} if legacy else {}
    running = Restartable(PROMPT_SERVER, "http", "{port}", env=env)
    running.start()
    try:
        row = register(name="HTTP prompts", slug="hp", transport="http", url=f"http://127.0.0.1:{running.port}/mcp")
        assert row.protocol_version == ("2025-11-25" if legacy else "2026-07-28")
        chat = _chat(user, "mcp_hp")
        client = _client(user)
        assert "/review" in client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
        used = client.post(f"/toolsets/mcp/chats/{chat.pk}/hp/prompt/use/", {"name": "review", "arg.language": "perl"})
        assert used.json()["draft"].startswith("Review this perl code")
        assert client.post(f"/toolsets/mcp/chats/{chat.pk}/hp/attach/", {"uri": "notes://today"}).status_code == 201
        # The preview page a resource_link opens reads through the same server, in its era.
        page = client.get("/toolsets/mcp/hp/resource/?uri=notes%3A%2F%2Ftoday")
        assert page.status_code == 200 and "Buy &lt;b&gt;milk" in page.content.decode()
    finally:
        running.stop()


@pytest.mark.skipif(not EVERYTHING.exists() or not shutil.which("node"), reason="npm ci installs server-everything")
def test_server_everythings_prompts_completions_and_templates(transactional_db: Any, user: Any) -> None:
    register(name="Everything", slug="ev", transport="stdio", command="node", args=[str(EVERYTHING), "stdio"])
    chat = _chat(user, "mcp_ev")
    client = _client(user)
    menu = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
    assert "/completable-prompt" in menu and "/args-prompt" in menu
    found = client.get(
        f"/toolsets/mcp/chats/{chat.pk}/ev/complete/",
        {"prompt": "completable-prompt", "argument": "department", "value": "E"},
    ).content.decode()
    assert 'value="Engineering"' in found
    used = client.post(
        f"/toolsets/mcp/chats/{chat.pk}/ev/prompt/use/",
        {"name": "completable-prompt", "arg.department": "Engineering", "arg.name": "Alice"},
    )
    assert used.status_code == 200, used.content
    assert "Alice" in used.json()["draft"]
    picker = client.get(f"/toolsets/mcp/chats/{chat.pk}/resources/").content.decode()
    assert "demo://resource/dynamic/text/{resourceId}" in picker
    made = client.post(
        f"/toolsets/mcp/chats/{chat.pk}/ev/attach/",
        {"template": "demo://resource/dynamic/text/{resourceId}", "var.resourceId": "1"},
    )
    assert made.status_code == 201, made.content
    assert json.loads(made.content)["files"][0]["kind"] == "text"


def test_a_server_with_tools_only_shows_no_prompts_and_no_error(transactional_db: Any, user: Any) -> None:
    register(
        name="Echo",
        slug="echo",
        transport="stdio",
        command=sys.executable,
        args=[str(Path(__file__).with_name("echo_server.py"))],
    )
    chat = _chat(user, "mcp_echo")
    client = _client(user)
    menu = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
    assert "offer no prompts" in menu and "mcp-problem" not in menu
    picker = client.get(f"/toolsets/mcp/chats/{chat.pk}/resources/").content.decode()
    assert "offer no resources" in picker and "mcp-problem" not in picker


def test_a_server_that_went_away_is_a_clear_502_and_the_menu_says_so(transactional_db: Any, user: Any) -> None:
    running = Restartable(PROMPT_SERVER, "http", "{port}")
    running.start()
    try:
        register(name="Gone", slug="gone", transport="http", url=f"http://127.0.0.1:{running.port}/mcp")
    finally:
        running.stop()
    chat = _chat(user, "mcp_gone")
    client = _client(user)
    menu = client.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/")
    assert menu.status_code == 200 and "mcp-problem" in menu.content.decode()
    used = client.post(f"/toolsets/mcp/chats/{chat.pk}/gone/prompt/use/", {"name": "review", "arg.language": "c"})
    # The failed listing marked it unreachable for a while: said so, as a conflict, not a 500.
    assert used.status_code in (409, 502) and "Gone" in used.json()["error"]
    form = client.get(f"/toolsets/mcp/chats/{chat.pk}/gone/prompt/", {"name": "review"})
    assert form.status_code in (409, 502) and "Gone" in form.content.decode()
    attached = client.post(f"/toolsets/mcp/chats/{chat.pk}/gone/attach/", {"uri": "notes://today"})
    assert attached.status_code in (409, 502)
    assert not Turn.objects.filter(chat=chat).exists() and not Attachment.objects.exists()


def _children_running(script: Path) -> list[int]:
    """This process's children running `script` (the stdio servers it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and str(script).encode() in command:
            found.append(int(entry.name))
    return found


def test_a_pickers_requests_share_one_pooled_server_closed_once_idle(prompt_server: Any, user: Any) -> None:
    """Each request of the pickers (menu, prompt, completion, attach) used to start a stdio server
    of its own. They now share one pooled connection on the process's lasting loop: one server
    process for every request, stopped when the connection has been idle too long."""
    from toolsets.mcp import client as mcp

    chat = _chat(user, "mcp_ps")
    browser = _client(user)
    assert "/review" in browser.get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
    first = _children_running(PROMPT_SERVER)
    assert len(first) == 1
    for language in ("perl", "rust", "go"):
        used = browser.post(
            f"/toolsets/mcp/chats/{chat.pk}/ps/prompt/use/", {"name": "review", "arg.language": language}
        )
        assert used.json()["draft"].startswith(f"Review this {language} code")
    assert browser.post(f"/toolsets/mcp/chats/{chat.pk}/ps/attach/", {"uri": "notes://today"}).status_code == 201
    assert _children_running(PROMPT_SERVER) == first

    # Idle past the limit: the lasting loop's next tidy stops the server.
    loop = mcp.lasting_loop()
    (connection,) = mcp._pools[loop].connections.values()
    connection.last_used -= mcp.IDLE_CLOSE_S + 1
    loop.call_soon_threadsafe(mcp.close_idle, loop)
    deadline = time.monotonic() + 10
    while _children_running(PROMPT_SERVER) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children_running(PROMPT_SERVER) == []
    assert not mcp._pools[loop].connections


def test_the_pickers_pooled_connections_leave_the_servers_announcements_to_the_workers(
    prompt_server: Any, user: Any
) -> None:
    """A web process's pooled connections serve requests: a server's "resources changed" or
    "tools changed" reaches the workers' connections, which read the documents and tools again
    once; the web processes' would only repeat that work (and race it)."""
    import asyncio

    import mcp_types

    from toolsets.mcp import client as mcp
    from toolsets.mcp import signals
    from toolsets.mcp.catalog import ServerSpec
    from toolsets.mcp.connection import Connection

    heard: list[str | None] = []

    def receiver(uri: str | None = None, **_: Any) -> None:
        heard.append(uri)

    signals.resources_changed.connect(receiver, weak=False)
    try:
        chat = _chat(user, "mcp_ps")
        assert "/review" in _client(user).get(f"/toolsets/mcp/chats/{chat.pk}/prompts/").content.decode()
        loop = mcp.lasting_loop()
        (pooled,) = mcp._pools[loop].connections.values()
        assert not pooled.watches
        update = mcp_types.ResourceUpdatedNotification(
            params=mcp_types.ResourceUpdatedNotificationParams(uri="notes://today")
        )
        asyncio.run_coroutine_threadsafe(pooled._on_message(update), loop).result(10)
        assert heard == []

        async def a_workers() -> None:
            spec = ServerSpec.of(prompt_server)
            watching = Connection(spec, mcp.access_for(spec, user.pk, ""))
            assert watching.watches
            await watching._on_message(update)

        asyncio.run(a_workers())
        assert heard == ["notes://today"]
    finally:
        signals.resources_changed.disconnect(receiver)
