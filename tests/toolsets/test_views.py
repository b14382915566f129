"""/toolsets/: a user's own, stricter tool policies; answering approval cards."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client

from chat.models import Chat, Turn
from toolsets.models import ChatToolAllowance, ToolRule, UserToolPolicy
from toolsets.policy import approval
from toolsets.policy.approval import ApprovalRequest

pytestmark = pytest.mark.django_db(transaction=True)


def logged_in(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def test_settings_page_shows_each_tools_policy(user: Any) -> None:
    html = logged_in(user).get("/toolsets/").content.decode()
    assert 'id="policy-workspace-create_task"' in html
    # An Ask tool offers Ask and Never, not Run: a user cannot loosen it.
    start = html.index('id="policy-workspace-create_task"')
    options = html[start : html.index("</select>", start)]
    assert "Ask me first" in options and "Never use it" in options and "Run it" not in options


def test_a_user_may_make_a_tool_stricter(user: Any) -> None:
    client = logged_in(user)
    response = client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "ask"})
    assert response.status_code == 200 and "Calculate: Ask" in response.content.decode()
    assert UserToolPolicy.objects.get(user=user).policy == "ask"
    client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "deny"})
    assert UserToolPolicy.objects.get(user=user).policy == "deny"
    # Back to the administrator's policy: the user's own choice is gone.
    client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "auto"})
    assert not UserToolPolicy.objects.exists()


def test_a_user_cannot_loosen_a_tool(user: Any) -> None:
    client = logged_in(user)
    response = client.post("/toolsets/workspace/policy/", {"tool": "create_task", "policy": "auto"})
    assert response.status_code == 400 and "never looser" in response.content.decode()
    ToolRule.objects.create(toolset_id="clock_math", tool="calculate", policy="deny")
    response = client.post("/toolsets/clock_math/policy/", {"tool": "calculate", "policy": "ask"})
    assert response.status_code == 400
    assert not UserToolPolicy.objects.exists()


@pytest.mark.parametrize(
    "data",
    [{"tool": "nope", "policy": "ask"}, {"policy": "ask"}, {"tool": "calculate", "policy": "sometimes"}, {}],
)
def test_bad_policy_posts_are_4xx(user: Any, data: dict[str, str]) -> None:
    response = logged_in(user).post("/toolsets/clock_math/policy/", data)
    assert 400 <= response.status_code < 500
    assert logged_in(user).post("/toolsets/nope/policy/", data).status_code == 404


# --- Approvals ------------------------------------------------------------------------------------


def waiting(user: Any, demo_model: Any, *, status: str = Turn.Status.RUNNING) -> tuple[Chat, ApprovalRequest]:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=status)
    request = ApprovalRequest(
        "workspace", "create_task", "toolset__workspace__create_task", "Workspace: Create task", {}, 60
    )

    async def open_it() -> None:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        await approval.open_request(client, request, chat_id=chat.pk, turn_id=turn.pk, user_id=user.pk)
        await client.aclose()

    asyncio.run(open_it())
    return chat, request


def answer_of(request: ApprovalRequest) -> dict[str, Any] | None:
    raw = redis.from_url(settings.REDIS_URL).get(f"{approval.PREFIX}:{request.id}:answer")
    return json.loads(raw) if raw else None


def test_the_owner_approves_once(user: Any, demo_model: Any) -> None:
    chat, request = waiting(user, demo_model)
    client = logged_in(user)
    response = client.post(f"/toolsets/approvals/{request.id}/", {"decision": "approve", "always": "1"})
    assert response.status_code == 200 and response.json() == {"ok": True, "message": "Approved."}
    assert answer_of(request) == {"approved": True, "reason": "", "always": True}
    assert ChatToolAllowance.objects.filter(chat=chat, toolset_id="workspace", tool="create_task").exists()
    again = client.post(f"/toolsets/approvals/{request.id}/", {"decision": "deny"})
    assert again.status_code == 409
    assert answer_of(request)["approved"] is True  # type: ignore[index]


def test_a_denial_carries_its_reason_and_never_an_allowance(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(user).post(
        f"/toolsets/approvals/{request.id}/", {"decision": "deny", "reason": "  wrong\n project ", "always": "1"}
    )
    assert response.status_code == 200
    assert answer_of(request) == {"approved": False, "reason": "wrong project", "always": False}
    assert not ChatToolAllowance.objects.exists()


def test_someone_elses_approval_is_not_found(user: Any, other_user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(other_user).post(f"/toolsets/approvals/{request.id}/", {"decision": "approve"})
    assert response.status_code == 404 and answer_of(request) is None


def test_an_approval_of_a_turn_that_ended_is_not_found(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model, status=Turn.Status.INTERRUPTED)
    response = logged_in(user).post(f"/toolsets/approvals/{request.id}/", {"decision": "approve"})
    assert response.status_code == 404 and answer_of(request) is None


@pytest.mark.parametrize(
    "data",
    [{}, {"decision": "maybe"}, {"decision": "deny", "reason": "x" * 501}, {"decision": "deny", "reason": "a\x00b"}],
)
def test_bad_answers_are_400(user: Any, demo_model: Any, data: dict[str, str]) -> None:
    _, request = waiting(user, demo_model)
    assert logged_in(user).post(f"/toolsets/approvals/{request.id}/", data).status_code == 400
    assert answer_of(request) is None


@pytest.mark.parametrize("approval_id", ["nope", "../../etc", "x" * 200, "a" * 24])
def test_unknown_approvals_are_404(user: Any, approval_id: str) -> None:
    assert logged_in(user).post(f"/toolsets/approvals/{approval_id}/", {"decision": "approve"}).status_code == 404


def test_answers_need_csrf_and_a_login(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    assert (
        logged_in(user, csrf=True).post(f"/toolsets/approvals/{request.id}/", {"decision": "approve"}).status_code
        == 403
    )
    assert Client().post(f"/toolsets/approvals/{request.id}/", {"decision": "approve"}).status_code == 302
    assert logged_in(user).get(f"/toolsets/approvals/{request.id}/").status_code == 405
    assert answer_of(request) is None
