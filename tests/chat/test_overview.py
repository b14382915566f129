"""The staff overview: staff only, and a fixed number of queries however much happened."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from chat.models import Chat, Message, Turn
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db


def _traffic(user: Any, model: Any, turns: int) -> None:
    chat = Chat.objects.create(owner=user, model=model)
    for i in range(turns):
        turn = Turn.objects.create(
            chat=chat, model=model, status=Turn.Status.COMPLETED if i % 2 else Turn.Status.FAILED
        )
        Message.objects.create(chat=chat, turn=turn, role=Message.Role.ASSISTANT, prompt_tokens=10, completion_tokens=5)
        ToolExecution.objects.create(
            user=user, turn=turn, toolset="clock_math", tool=f"tool{i % 4}", tool_call_id=f"c{i}",
            status="error" if i % 3 else "success", error_type="timeout_error" if i % 3 else "", duration_ms=i,
        )  # fmt: skip


def _get(client: Client) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/admin/overview/")
    return response, [query["sql"] for query in queries.captured_queries]


def test_staff_see_the_figures_in_a_fixed_number_of_queries(
    user: Any, other_user: Any, demo_model: Any, steady_mcp_snapshot: None
) -> None:
    other_user.is_staff = True
    other_user.save()
    client = Client()
    client.force_login(other_user)
    _traffic(user, demo_model, 2)
    _get(client)  # the first request also loads the session and caches site-wide rows
    response, few = _get(client)
    assert response.status_code == 200
    assert b"Turns by outcome" in response.content
    _traffic(user, demo_model, 30)
    response, many = _get(client)
    assert response.status_code == 200
    # On a mismatch the message names the queries of both requests.
    assert len(many) == len(few), (few, many)
    text = response.content.decode()
    assert "clock_math.tool1" in text and "timeout_error" in text and "alice" in text


def test_the_overview_is_not_for_other_users(client: Client, user: Any) -> None:
    assert client.get("/admin/overview/").status_code == 302
    client.force_login(user)
    response = client.get("/admin/overview/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_tripped_breaker_is_listed(other_user: Any) -> None:
    from toolsets.policy import breaker

    other_user.is_staff = True
    other_user.save()
    client = Client()
    client.force_login(other_user)
    scope, toolset_id, tool = next(s for s in breaker.all_scopes() if s[2])
    breakers = breaker.Breakers()
    try:
        for _ in range(breakers.limits.failures):
            breakers.record([scope], ok=False)
        text = client.get("/admin/overview/").content.decode()
        assert f"{toolset_id}.{tool}" in text
        assert "ops-breakers" in text and "breakers closed: every tool" not in text
    finally:
        breakers.reset(scope)
    assert "breakers closed: every tool" in client.get("/admin/overview/").content.decode()
