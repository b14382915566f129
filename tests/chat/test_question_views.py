"""One answer view for every kind of question (chat/question_views.py): `/questions/<id>/`
answers any kind, the older per-kind URLs only theirs, and the store's rules (open, owned,
before the deadline, once) hold whichever way in."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest
import redis
from django.conf import settings
from django.test import Client

from chat import presenters
from chat.models import Chat, Turn
from core import questions
from toolsets.mcp import elicitation
from toolsets.mcp.elicitation import ElicitationRequest
from toolsets.policy import approval
from toolsets.policy.approval import ApprovalRequest

pytestmark = pytest.mark.django_db(transaction=True)


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def opened(user: Any, demo_model: Any, kind: str, timeout_s: float = 60) -> str:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=Turn.Status.RUNNING)

    async def open_it() -> str:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        try:
            if kind == "approval":
                asked = ApprovalRequest(
                    "workspace", "create_task", "toolset__workspace__create_task", "W", {}, timeout_s
                )
                await approval.open_request(client, asked, chat_id=chat.pk, turn_id=turn.pk, user_id=user.pk)
                return asked.id
            if kind == "elicitation":
                question = ElicitationRequest("Shop", "t", "url", "Pay", timeout_s, url="https://pay.example/")
                await elicitation.open_request(client, question, chat_id=chat.pk, turn_id=turn.pk, user_id=user.pk)
                return question.id
            other = questions.Question("survey", user.pk, {"chat_id": chat.pk, "turn_id": turn.pk}, timeout_s)
            return (await questions.ask(client, other)).id
        finally:
            await client.aclose()

    return asyncio.run(open_it())


def answer_of(question_id: str) -> Any:
    async def read() -> Any:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        try:
            return await questions.answered(client, question_id)
        finally:
            await client.aclose()

    return asyncio.run(read())


def test_one_url_answers_every_kind(user: Any, demo_model: Any) -> None:
    client = logged_in(user)
    approval_id = opened(user, demo_model, "approval")
    response = client.post(f"/questions/{approval_id}/", {"decision": "deny", "reason": "not now"})
    assert response.status_code == 200 and response.json() == {"ok": True, "message": "Denied."}
    assert answer_of(approval_id) == {"approved": False, "reason": "not now", "always": False}
    question_id = opened(user, demo_model, "elicitation")
    response = client.post(f"/questions/{question_id}/", {"action": "accept"})
    assert response.status_code == 200 and response.json() == {"ok": True, "message": "Sent."}
    assert answer_of(question_id) == {"action": "accept", "content": None}


def test_the_cards_answer_url_is_the_one_url(user: Any, demo_model: Any) -> None:
    request = ApprovalRequest("w", "t", "toolset__w__t", "W", {}, 60)
    assert presenters.approval(request)["url"] == f"/questions/{request.id}/"
    asked = ElicitationRequest("Shop", "t", "url", "Pay", 60)
    assert presenters.elicitation(asked)["url"] == f"/questions/{asked.id}/"


def test_a_kinds_own_url_answers_only_that_kind(user: Any, demo_model: Any) -> None:
    client = logged_in(user)
    approval_id = opened(user, demo_model, "approval")
    question_id = opened(user, demo_model, "elicitation")
    assert client.post(f"/elicitations/{approval_id}/", {"action": "accept"}).status_code == 404
    assert client.post(f"/approvals/{question_id}/", {"decision": "approve"}).status_code == 404
    assert answer_of(approval_id) is None and answer_of(question_id) is None


def test_a_kind_nobody_here_can_answer_is_not_found(user: Any, demo_model: Any) -> None:
    question_id = opened(user, demo_model, "survey")
    assert logged_in(user).post(f"/questions/{question_id}/", {"action": "accept"}).status_code == 404
    assert answer_of(question_id) is None


def test_the_checks_of_the_kind_apply_at_the_one_url(user: Any, demo_model: Any) -> None:
    client = logged_in(user)
    approval_id = opened(user, demo_model, "approval")
    refused = client.post(f"/questions/{approval_id}/", {"action": "accept"})
    assert refused.status_code == 400 and refused.json()["message"] == "Choose Approve or Deny."
    assert answer_of(approval_id) is None


def test_someone_elses_question_is_not_found_at_the_one_url(user: Any, other_user: Any, demo_model: Any) -> None:
    question_id = opened(user, demo_model, "elicitation")
    assert logged_in(other_user).post(f"/questions/{question_id}/", {"action": "accept"}).status_code == 404
    assert answer_of(question_id) is None


def test_a_withdrawn_question_cannot_be_answered(user: Any, demo_model: Any) -> None:
    question_id = opened(user, demo_model, "approval")

    async def withdraw() -> None:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        await questions.close(client, question_id)
        await client.aclose()

    asyncio.run(withdraw())
    response = logged_in(user).post(f"/questions/{question_id}/", {"decision": "approve"})
    assert response.status_code == 404 and "no longer waiting" in response.json()["message"]
    assert answer_of(question_id) is None


def test_answers_need_csrf_a_login_and_a_post(user: Any, demo_model: Any) -> None:
    question_id = opened(user, demo_model, "approval")
    assert Client().post(f"/questions/{question_id}/", {"decision": "approve"}).status_code == 302
    assert logged_in(user).get(f"/questions/{question_id}/").status_code == 405
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(user)
    assert checked.post(f"/questions/{question_id}/", {"decision": "approve"}).status_code == 403
    assert answer_of(question_id) is None


@pytest.mark.parametrize("kind", ["approval", "form", "url"])
def test_every_kind_is_drawn_in_one_box_with_one_form_and_one_note(kind: str) -> None:
    if kind == "approval":
        request: Any = ApprovalRequest("w", "t", "toolset__w__t", "W", {}, 60)
        shown = presenters.approval(request)
    else:
        mode: Literal["form", "url"] = "url" if kind == "url" else "form"
        request = ElicitationRequest("Shop", "t", mode, "Pay", 60, url="https://pay.example/", domain="pay.example")
        shown = presenters.elicitation(request)
    request.deadline = 2_000_000_000
    card = presenters.card(1, 0, 0, name="toolset__w__t", status="waiting", question=shown)
    html = presenters.render("chat/_tool_card.html", {"card": card})
    testid = "approval-card" if kind == "approval" else "elicitation-card"
    assert html.count("data-question=") == 1 and f'data-testid="{testid}"' in html
    assert html.count("data-question-form") == 1 and f'data-question-url="/questions/{request.id}/"' in html
    assert html.count("Waiting for your answer until") == 1
