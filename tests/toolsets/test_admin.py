"""Django admin: every tool's policy, caching and circuit breaker, with a reset."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from toolsets.models import PolicySettings, ToolRule
from toolsets.policy import breaker

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: Any) -> Client:
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "a long admin passphrase")
    client = Client()
    client.force_login(admin)
    return client


def test_tool_policies_list_every_tool_with_its_breaker(admin_client: Client) -> None:
    scope = breaker.tool_scope("exa", "search")
    board = breaker.Breakers()
    for _ in range(5):
        board.record([scope], ok=False)
    page = admin_client.get("/admin/toolsets/toolrule/?toolset_id=exa")
    assert page.status_code == 200
    html = page.content.decode()
    assert "exa.search" in html and "exa.answer" in html
    assert "Open — probe after" in html and "opened 1 time" in html
    assert "600 s, shared between users" in html
    assert ToolRule.objects.filter(toolset_id="workspace", tool="create_task").exists()  # rows made for every tool

    rule = ToolRule.objects.get(toolset_id="exa", tool="search")
    response = admin_client.post(
        "/admin/toolsets/toolrule/", {"action": "reset_breakers", "_selected_action": [rule.pk]}, follow=True
    )
    assert response.status_code == 200 and "Reset 1 breaker" in response.content.decode()
    assert board.states([(scope, "exa", "search")])[0].state == breaker.CLOSED


def test_a_tools_page_shows_its_declaration_and_saves_a_policy(admin_client: Client) -> None:
    admin_client.get("/admin/toolsets/toolrule/")
    rule = ToolRule.objects.get(toolset_id="workspace", tool="create_task")
    page = admin_client.get(f"/admin/toolsets/toolrule/{rule.pk}/change/").content.decode()
    assert "Ask" in page and "Closed" in page
    response = admin_client.post(f"/admin/toolsets/toolrule/{rule.pk}/change/", {"policy": "auto", "cache_enabled": ""})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert (rule.policy, rule.cache_enabled) == ("auto", False)


def test_policy_settings_is_one_row(admin_client: Client) -> None:
    assert admin_client.get("/admin/toolsets/policysettings/add/").status_code == 200
    PolicySettings(approval_timeout_s=120).save()
    assert admin_client.get("/admin/toolsets/policysettings/add/").status_code == 403
    assert PolicySettings.load().approval_timeout_s == 120


def test_the_audit_log_filters_by_client(admin_client: Client, user: Any) -> None:
    from toolsets.models import ToolExecution

    for client, tool in (("mcp: Claude Desktop", "calculate"), ("openai: token script", "current_time"), ("", "web")):
        ToolExecution.objects.create(user=user, toolset="clock_math", tool=tool, client=client, tool_call_id=tool)
    page = admin_client.get("/admin/toolsets/toolexecution/")
    html = page.content.decode()
    # The filter offers each client seen.
    assert "?client=mcp%3A+Claude+Desktop" in html and "?client=openai%3A+token+script" in html
    mcp = admin_client.get("/admin/toolsets/toolexecution/", {"client": "mcp: Claude Desktop"}).content.decode()
    assert "1 tool execution" in mcp and 'class="field-tool">calculate' in mcp
    assert 'class="field-tool">current_time' not in mcp


def test_the_audit_log_shows_the_turn_of_a_view_s_call(admin_client: Client, user: Any, demo_model: Any) -> None:
    from chat.models import Chat, Turn
    from toolsets.models import ToolExecution

    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model)
    ToolExecution.objects.create(
        user=user, turn=turn, toolset="mcp_apps", tool="app_secret", client="mcp-app: Apps", tool_call_id="app-1"
    )
    ToolExecution.objects.create(user=user, toolset="clock_math", tool="calculate", client="mcp: X", tool_call_id="c")
    html = admin_client.get("/admin/toolsets/toolexecution/", {"client": "mcp-app: Apps"}).content.decode()
    assert "1 tool execution" in html
    assert f'<a href="/admin/chat/turn/{turn.pk}/change/">chat {chat.pk} · turn {turn.pk}</a>' in html
