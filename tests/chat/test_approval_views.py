"""Answering approval cards (chat/question_views.py, the approval kind): only the owner of a
running turn's chat, once, with a valid decision."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client

from chat.models import Chat, Turn
from toolsets.models import ChatToolAllowance
from toolsets.policy import approval
from toolsets.policy.approval import ApprovalRequest

pytestmark = pytest.mark.django_db(transaction=True)


def logged_in(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def waiting(
    user: Any, demo_model: Any, *, status: str = Turn.Status.RUNNING, always_allowable: bool = True
) -> tuple[Chat, ApprovalRequest]:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=status)
    request = ApprovalRequest(
        "workspace",
        "create_task",
        "toolset__workspace__create_task",
        "Workspace: Create task",
        {},
        60,
        always_allowable=always_allowable,
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
    response = client.post(f"/approvals/{request.id}/", {"decision": "approve", "always": "1"})
    assert response.status_code == 200 and response.json() == {"ok": True, "message": "Approved."}
    assert answer_of(request) == {"approved": True, "reason": "", "always": True}
    assert ChatToolAllowance.objects.filter(chat=chat, toolset_id="workspace", tool="create_task").exists()
    again = client.post(f"/approvals/{request.id}/", {"decision": "deny"})
    assert again.status_code == 409
    assert answer_of(request)["approved"] is True  # type: ignore[index]


def test_a_tool_that_asks_every_time_cannot_be_always_allowed(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model, always_allowable=False)
    client = logged_in(user)
    refused = client.post(f"/approvals/{request.id}/", {"decision": "approve", "always": "1"})
    assert refused.status_code == 400 and "asks every time" in refused.json()["message"]
    assert answer_of(request) is None and not ChatToolAllowance.objects.exists()
    assert client.post(f"/approvals/{request.id}/", {"decision": "approve"}).status_code == 200


def test_a_denial_carries_its_reason_and_never_an_allowance(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(user).post(
        f"/approvals/{request.id}/", {"decision": "deny", "reason": "  wrong\n project ", "always": "1"}
    )
    assert response.status_code == 200
    assert answer_of(request) == {"approved": False, "reason": "wrong project", "always": False}
    assert not ChatToolAllowance.objects.exists()


def test_someone_elses_approval_is_not_found(user: Any, other_user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(other_user).post(f"/approvals/{request.id}/", {"decision": "approve"})
    assert response.status_code == 404 and answer_of(request) is None


def test_an_approval_of_a_turn_that_ended_is_not_found(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model, status=Turn.Status.INTERRUPTED)
    response = logged_in(user).post(f"/approvals/{request.id}/", {"decision": "approve"})
    assert response.status_code == 404 and answer_of(request) is None


@pytest.mark.parametrize(
    "data",
    [{}, {"decision": "maybe"}, {"decision": "deny", "reason": "x" * 501}, {"decision": "deny", "reason": "a\x00b"}],
)
def test_bad_answers_are_400(user: Any, demo_model: Any, data: dict[str, str]) -> None:
    _, request = waiting(user, demo_model)
    assert logged_in(user).post(f"/approvals/{request.id}/", data).status_code == 400
    assert answer_of(request) is None


@pytest.mark.parametrize("approval_id", ["nope", "../../etc", "x" * 200, "a" * 24])
def test_unknown_approvals_are_404(user: Any, approval_id: str) -> None:
    assert logged_in(user).post(f"/approvals/{approval_id}/", {"decision": "approve"}).status_code == 404


def test_answers_need_csrf_and_a_login(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    assert logged_in(user, csrf=True).post(f"/approvals/{request.id}/", {"decision": "approve"}).status_code == 403
    assert Client().post(f"/approvals/{request.id}/", {"decision": "approve"}).status_code == 302
    assert logged_in(user).get(f"/approvals/{request.id}/").status_code == 405
    assert answer_of(request) is None


def mcp_waiting(user: Any) -> ApprovalRequest:
    """An MCP client's call waiting on the approval page: no chat, no turn."""
    request = ApprovalRequest(
        "clock_math",
        "calculate",
        "toolset__clock_math__calculate",
        "Clock & math: Calculate",
        {"expression": "<b>1</b>"},
        60,
    )

    async def open_it() -> None:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        await approval.open_request(client, request, chat_id=None, turn_id=None, user_id=user.pk, client="mcp: Zed")
        await client.aclose()

    asyncio.run(open_it())
    return request


def test_the_approval_page_shows_the_call_and_takes_one_valid_answer(user: Any) -> None:
    request = mcp_waiting(user)
    client = logged_in(user, csrf=True)
    page = client.get(f"/approvals/{request.id}/review/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Zed" in text and "Clock &amp; math: Calculate" in text
    assert "&lt;b&gt;1&lt;/b&gt;" in text and "<b>1</b>" not in text  # arguments are shown, never rendered
    token = page.cookies["csrftoken"].value
    # No CSRF token: refused (a page on another site cannot approve for the user).
    assert client.post(f"/approvals/{request.id}/review/", {"decision": "approve"}).status_code == 403
    bad = client.post(f"/approvals/{request.id}/review/", {"decision": "maybe", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400 and "Choose Approve or Deny" in bad.content.decode()
    long = client.post(
        f"/approvals/{request.id}/review/", {"decision": "deny", "reason": "x" * 501, "csrfmiddlewaretoken": token}
    )
    assert long.status_code == 400 and answer_of(request) is None
    # "Always allow in this chat" means nothing without a chat: ignored.
    done = client.post(
        f"/approvals/{request.id}/review/", {"decision": "approve", "always": "1", "csrfmiddlewaretoken": token}
    )
    assert done.status_code == 200 and "Approved." in done.content.decode()
    assert answer_of(request) == {"approved": True, "reason": "", "always": False}
    again = client.post(f"/approvals/{request.id}/review/", {"decision": "deny", "csrfmiddlewaretoken": token})
    assert again.status_code == 409 and answer_of(request)["approved"] is True  # type: ignore[index]


def test_the_approval_page_is_nobody_elses(user: Any, other_user: Any) -> None:
    request = mcp_waiting(user)
    stranger = logged_in(other_user)
    assert stranger.get(f"/approvals/{request.id}/review/").status_code == 404
    assert stranger.post(f"/approvals/{request.id}/review/", {"decision": "approve"}).status_code == 404
    assert stranger.post(f"/approvals/{request.id}/", {"decision": "approve"}).status_code == 404
    assert Client().get(f"/approvals/{request.id}/review/").status_code == 302  # sign in first
    assert logged_in(user).put(f"/approvals/{request.id}/review/").status_code == 405
    assert logged_in(user).get("/approvals/not-an-id!/review/").status_code == 404
    assert answer_of(request) is None
