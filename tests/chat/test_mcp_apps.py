"""What a View may ask of Tessera (chat/mcp_apps.py), against the test App server over stdio
(tests/toolsets/mcp/apps_server.py): only the card's owner, only its own server's tools that
apps may call, each run by the executor (audited with the card's turn; an "ask" tool only once
the user approved it on the chat's approval card, chat/app_asking.py), and what it tells the
model kept for the chat's next turn, bounded."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.test import Client, override_settings

from chat import app_asking, app_context
from chat.events import group_name
from chat.models import Chat, Turn
from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register
from tests.toolsets.mcp.test_apps import APPS_SERVER
from toolsets.mcp import app_sandbox
from toolsets.mcp.models import AppResource, MCPServer
from toolsets.models import ToolExecution, ToolsetConfig

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def card(user: Any, demo_model: Any) -> ToolExecution:
    """A finished call of the server's `show` tool on a card of `user`'s chat."""
    register(name="Apps", slug="apps", transport="stdio", **forked(APPS_SERVER))
    ToolsetConfig.objects.create(toolset_id="mcp_apps", policy="auto")
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={"mcp_apps": ["show", "model_only"]})
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.COMPLETED)
    return ToolExecution.objects.create(
        user=user,
        turn=turn,
        tool_call_id="c1",
        toolset="mcp_apps",
        tool="show",
        arguments={"text": "hi"},
        status=ToolExecution.Status.SUCCESS,
        result={"content": [{"type": "text", "text": "shown: hi"}, {"type": "note", "text": "1 more"}]},
    )


def signed_in(user: Any) -> Client:
    client = Client(HTTP_HOST="127.0.0.1:8000")
    client.force_login(user)
    return client


def call(client: Client, card: ToolExecution, **body: Any) -> Any:
    return client.post(f"/apps/{card.pk}/call/", body, content_type="application/json")


def test_the_view_gets_its_page_its_sandbox_and_the_call(user: Any, card: ToolExecution) -> None:
    answer = signed_in(user).get(f"/apps/{card.pk}/").json()
    assert "Hostile view v1" in answer["html"]
    # The server's own sandbox origin (toolsets/mcp/app_sandbox.py), never the page's.
    origin = f"http://{app_sandbox.label('apps')}.localhost:8000"
    assert answer["sandbox"]["url"].startswith(f"{origin}/app-sandbox/?p=")
    assert answer["sandbox"]["origin"] == origin
    assert answer["sandbox"]["csp"] == {
        "connectDomains": ["https://api.example.com"],
        "resourceDomains": ["https://cdn.example.com"],
    }
    assert answer["input"] == {"text": "hi"} and answer["tool"]["name"] == "show"
    # The protocol's CallToolResult: Tessera's own note is text, nothing else of its own.
    assert answer["result"] == {"content": [{"type": "text", "text": "shown: hi"}, {"type": "text", "text": "1 more"}]}


def test_nobody_else_reaches_a_card_s_view(other_user: Any, card: ToolExecution) -> None:
    client = signed_in(other_user)
    assert client.get(f"/apps/{card.pk}/").status_code == 404
    assert call(client, card, name="app_secret").status_code == 404
    assert client.post(f"/apps/{card.pk}/context/", {}, content_type="application/json").status_code == 404
    assert not ToolExecution.objects.filter(client__startswith="mcp-app").exists()


def test_a_view_calls_its_own_server_s_tools_that_apps_may_call(
    user: Any, card: ToolExecution, monkeypatch: pytest.MonkeyPatch
) -> None:
    spanned: dict[str, Any] = {}
    span = type("Span", (), {"set_attributes": lambda self, found: spanned.update(found)})()
    monkeypatch.setattr("chat.mcp_apps.get_current_span", lambda: span)
    Turn.objects.filter(pk=card.turn_id or 0).update(trace_id="ab" * 16)
    client = signed_in(user)
    answer = call(client, card, name="app_secret", arguments={})
    assert answer.status_code == 200
    assert answer.json()["content"] == [{"type": "text", "text": "app-only ran"}]
    record = ToolExecution.objects.get(client="mcp-app: Apps")
    assert (record.toolset, record.tool, record.status, record.user_id) == (
        "mcp_apps",
        "app_secret",
        "success",
        user.pk,
    )
    # The View's call, not the model's: linked to the turn whose card shows the View, at no
    # place of its own among the model's calls.
    assert record.turn_id == card.turn_id and (record.step, record.position) == (None, None)
    # The trace names them too: the request's span, under which the executor's span nests.
    assert spanned == {
        "tessera.chat.id": card.turn.chat_id,  # type: ignore[union-attr]
        "tessera.turn.id": card.turn_id,
        "tessera.mcp_app.card_execution_id": card.pk,
        "tessera.turn.trace_id": "ab" * 16,
    }
    refused = call(client, card, name="model_only")
    assert refused.status_code == 403 and "may not be called by its app" in refused.json()["error"]
    other = call(client, card, name="toolset__clock_math__calculate", arguments={"expression": "1+1"})
    assert other.status_code == 403 and "Apps has no tool named" in other.json()["error"]
    assert ToolExecution.objects.filter(client="mcp-app: Apps").count() == 1


def asked_in_chat(user: Any, card: ToolExecution, answer: dict[str, str], *, answerer: Any = None) -> Any:
    """A View's call of an "ask" tool, answered on the approval card pushed to the chat's tabs:
    (the View's answer, the cards pushed, the answer's status)."""
    chat_id = card.turn.chat_id  # type: ignore[union-attr]

    async def run() -> tuple[Any, list[dict[str, Any]], int]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group_name(chat_id), channel)
        calling = asyncio.create_task(asyncio.to_thread(call, signed_in(user), card, name="app_secret"))
        pushed = [await asyncio.wait_for(layer.receive(channel), 30)]
        question_id = re.search(r'data-question="([^"]+)"', pushed[0]["html"]).group(1)  # type: ignore[union-attr]
        answered = await asyncio.to_thread(signed_in(answerer or user).post, f"/questions/{question_id}/", answer)
        if answered.status_code != 200:
            await asyncio.to_thread(signed_in(user).post, f"/questions/{question_id}/", {"decision": "deny"})
        done = await asyncio.wait_for(calling, 30)
        pushed.append(await asyncio.wait_for(layer.receive(channel), 30))
        return done, pushed, answered.status_code

    return asyncio.run(run())


def test_an_ask_tool_runs_once_the_user_approved_it_on_the_chat_s_card(user: Any, card: ToolExecution) -> None:
    ToolsetConfig.objects.filter(toolset_id="mcp_apps").update(policy="ask")
    done, pushed, status = asked_in_chat(user, card, {"decision": "approve"})
    assert status == 200 and done.status_code == 200
    assert done.json()["content"] == [{"type": "text", "text": "app-only ran"}]
    # The card went under the View of the card (its box), the chat's own approval card in it.
    assert pushed[0]["type"] == "chat.app"
    box = app_asking.box(card)
    # Marked with where it goes, so a tab that does not show that card drops it (mcp_apps.js).
    assert pushed[0]["html"].startswith(f'<!--app-ask {box}-asks--><div hx-swap-oob="beforeend:#{box}-asks">')
    assert 'data-testid="approval-card"' in pushed[0]["html"] and "The app from Apps" in pushed[0]["html"]
    assert pushed[1]["html"].startswith("<!--app-ask app-ask-") and 'hx-swap-oob="true"' in pushed[1]["html"]
    assert "Approved" in pushed[1]["html"]
    record = ToolExecution.objects.get(client="mcp-app: Apps")
    assert (record.approval, record.status, record.turn_id) == ("approved", "success", card.turn_id)


def test_a_denied_call_of_a_view_says_denied_to_the_view_and_on_the_card(user: Any, card: ToolExecution) -> None:
    ToolsetConfig.objects.filter(toolset_id="mcp_apps").update(policy="ask")
    done, pushed, _ = asked_in_chat(user, card, {"decision": "deny", "reason": "not now"})
    assert done.status_code == 200 and done.json()["isError"] is True
    text = done.json()["content"][0]["text"]
    assert text == "The user denied this call; it did not run. Their reason: not now"
    assert "Connect" not in text and "Denied" in pushed[1]["html"]
    record = ToolExecution.objects.get(client="mcp-app: Apps")
    assert (record.approval, record.status, record.error_type) == ("denied", "error", "permission_denied")


def test_nobody_else_answers_a_view_s_question(user: Any, other_user: Any, card: ToolExecution) -> None:
    ToolsetConfig.objects.filter(toolset_id="mcp_apps").update(policy="ask")
    done, _, status = asked_in_chat(user, card, {"decision": "approve"}, answerer=other_user)
    assert status == 404 and done.json()["isError"] is True
    assert ToolExecution.objects.get(client="mcp-app: Apps").approval == "denied"


def test_a_view_s_message_is_confirmed_first_where_the_admin_says_so(user: Any, card: ToolExecution) -> None:
    assert signed_in(user).get(f"/apps/{card.pk}/").json()["confirm_messages"] is False
    MCPServer.objects.filter(slug="apps").update(apps_confirm_messages=True)
    assert signed_in(user).get(f"/apps/{card.pk}/").json()["confirm_messages"] is True


def test_a_view_s_requests_are_rate_limited(user: Any, card: ToolExecution) -> None:
    client = signed_in(user)
    with override_settings(TESSERA={**settings.TESSERA, "MCP_APP_REQUESTS_PER_MINUTE": 2}):
        assert [call(client, card, name="model_only").status_code for _ in range(3)] == [403, 403, 429]


def test_what_a_view_tells_the_model_reaches_the_next_turn_bounded(user: Any, card: ToolExecution) -> None:
    client = signed_in(user)
    body = {"content": [{"type": "text", "text": "The user picked <b>blue</b>."}], "structuredContent": {"n": 1}}
    answer = client.post(f"/apps/{card.pk}/context/", body, content_type="application/json")
    assert answer.status_code == 200
    prompt = app_context.for_prompt(card.turn.chat_id)  # type: ignore[union-attr]
    assert '<app server="Apps">\nThe user picked &lt;b&gt;blue&lt;/b&gt;.\n{"n": 1}\n</app>' in prompt
    huge = {"content": [{"type": "text", "text": "x" * 100_000}]}
    client.post(f"/apps/{card.pk}/context/", huge, content_type="application/json")
    prompt = app_context.for_prompt(card.turn.chat_id)  # type: ignore[union-attr]
    kept = prompt.split('<app server="Apps">\n', 1)[1].split("\n</app>", 1)[0]
    assert kept == "x" * int(settings.TESSERA["MCP_APP_CONTEXT_MAX_CHARS"])
    assert "blue" not in prompt  # each update replaces the View's previous one


def test_a_view_reads_resources_of_its_own_server_selected_for_the_chat(user: Any, card: ToolExecution) -> None:
    client = signed_in(user)
    answer = client.post(f"/apps/{card.pk}/read/", {"uri": "ui://hostile/view.html"}, content_type="application/json")
    assert answer.status_code == 200
    (content,) = answer.json()["contents"]
    assert content["uri"] == "ui://hostile/view.html" and "Hostile view" in content["text"]
    bad = client.post(f"/apps/{card.pk}/read/", {"uri": "no scheme"}, content_type="application/json")
    assert bad.status_code == 400
    Chat.objects.filter(pk=card.turn.chat_id).update(enabled_tools={})  # type: ignore[union-attr]
    unselected = client.post(
        f"/apps/{card.pk}/read/", {"uri": "ui://hostile/view.html"}, content_type="application/json"
    )
    assert unselected.status_code == 403 and "not selected for this chat" in unselected.json()["error"]


def test_a_card_shows_the_page_its_call_ran_with_after_an_admin_accepted_another(
    user: Any, card: ToolExecution
) -> None:
    current = AppResource.objects.get(server__slug="apps")
    old = AppResource.objects.create(server=current.server, sha256="0" * 64, uri=current.uri, html="<p>Old view</p>")
    ToolExecution.objects.filter(pk=card.pk).update(app_sha256=old.sha256)
    assert signed_in(user).get(f"/apps/{card.pk}/").json()["html"] == "<p>Old view</p>"
    # A call recorded before pages were pinned shows the page approved now.
    ToolExecution.objects.filter(pk=card.pk).update(app_sha256="")
    assert "Hostile view v1" in signed_in(user).get(f"/apps/{card.pk}/").json()["html"]


def test_every_call_records_the_page_approved_when_it_ran(user: Any, card: ToolExecution) -> None:
    client = signed_in(user)
    call(client, card, name="app_secret", arguments={})
    record = ToolExecution.objects.get(client="mcp-app: Apps")
    assert record.app_sha256 == AppResource.objects.get(server__slug="apps").sha256


def test_a_view_is_shown_while_the_model_writes_its_call(user: Any, other_user: Any, card: ToolExecution) -> None:
    chat_id = card.turn.chat_id  # type: ignore[union-attr]
    url = f"/apps/chat/{chat_id}/toolset__mcp_apps__show/"
    answer = signed_in(user).get(url).json()
    assert "Hostile view v1" in answer["html"] and answer["status"] == "pending" and answer["result"] is None
    assert signed_in(other_user).get(url).status_code == 404
    # Only a tool selected for the chat, of a server, with a page.
    assert signed_in(user).get(f"/apps/chat/{chat_id}/toolset__mcp_apps__app_secret/").status_code == 404
    assert signed_in(user).get(f"/apps/chat/{chat_id}/toolset__clock_math__calculate/").status_code == 404
    assert signed_in(user).get(f"/apps/chat/{chat_id}/nothing/").status_code == 404


def test_a_call_that_ended_without_a_result_tells_its_view_why(user: Any, card: ToolExecution) -> None:
    ToolExecution.objects.filter(pk=card.pk).update(status="error", error="The user denied this call.")
    answer = signed_in(user).get(f"/apps/{card.pk}/").json()
    assert answer["status"] == "error" and answer["result"] is None
    assert answer["reason"] == "The user denied this call."


def test_a_used_up_budget_stops_a_view_s_calls(user: Any, card: ToolExecution, demo_model: Any) -> None:
    from chat.models import Budget, Spend

    Budget.objects.create(user=user, period="day", max_tokens=1)
    Spend.objects.create(user=user, model_name=demo_model.model, prompt_tokens=5)
    refused = call(signed_in(user), card, name="app_secret", arguments={})
    assert refused.status_code == 429 and "Your daily budget is used up" in refused.json()["error"]
    assert not ToolExecution.objects.filter(client="mcp-app: Apps").exists()
