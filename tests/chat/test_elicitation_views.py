"""Answering an MCP server's question (chat/question_views.py, the elicitation kind): only the
owner of a running turn's chat, once, with an action, and for a form with values the server's
schema accepts."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import Client

from chat import presenters
from chat.models import Chat, Turn
from toolsets.mcp import elicitation, elicitation_form
from toolsets.mcp.elicitation import ElicitationRequest

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "title": "Email", "format": "email"},
        "age": {"type": "integer", "title": "Age", "minimum": 18, "maximum": 130},
        "when": {"type": "string", "format": "date"},
        "site": {"type": "string", "format": "uri"},
        "size": {"type": "string", "enum": ["s", "m"]},
        "extras": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 2},
        "agree": {"type": "boolean"},
    },
    "required": ["email", "age"],
}


def logged_in(user: Any, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def waiting(
    user: Any, demo_model: Any, *, status: str = Turn.Status.RUNNING, mode: str = "form", schema: Any = SCHEMA
) -> tuple[Chat, ElicitationRequest]:
    chat = Chat.objects.create(owner=user, model=demo_model)
    turn = Turn.objects.create(chat=chat, model=demo_model, status=status)
    if mode == "form":
        request = ElicitationRequest(
            "Shop",
            "order",
            "form",
            "Your details?",
            60,
            fields=elicitation_form.form_fields(schema),
            schema=elicitation_form.checked_schema(schema),
        )
    else:
        request = ElicitationRequest(
            "Shop", "order", "url", "Pay", 60, url="https://pay.example/x", domain="pay.example", elicitation_id="e1"
        )

    async def open_it() -> None:
        client = redis.asyncio.from_url(settings.REDIS_URL)
        await elicitation.open_request(client, request, chat_id=chat.pk, turn_id=turn.pk, user_id=user.pk)
        await client.aclose()

    asyncio.run(open_it())
    return chat, request


def answer_of(request: ElicitationRequest) -> dict[str, Any] | None:
    raw = redis.from_url(settings.REDIS_URL).get(f"{elicitation.PREFIX}:{request.id}:answer")
    return json.loads(raw) if raw else None


def url_of(request: ElicitationRequest) -> str:
    return f"/elicitations/{request.id}/"


def test_the_owner_accepts_a_valid_form_once(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    client = logged_in(user)
    data = {"action": "accept", "field-0": "ada@example.com", "field-1": "36", "field-5": ["a", "c"], "field-6": "on"}
    response = client.post(url_of(request), data)
    assert response.status_code == 200, response.content
    assert answer_of(request) == {
        "action": "accept",
        "content": {"email": "ada@example.com", "age": 36, "extras": ["a", "c"], "agree": True},
    }
    again = client.post(url_of(request), {"action": "decline"})
    assert again.status_code == 409
    assert answer_of(request)["action"] == "accept"  # type: ignore[index]


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        ({}, {"field-0": "This field is required.", "field-1": "This field is required."}),
        ({"field-0": "not-an-email", "field-1": "36"}, {"field-0": "Enter a valid email address."}),
        ({"field-0": "a@b.example", "field-1": "12"}, {"field-1": "Enter a number at least 18."}),
        ({"field-0": "a@b.example", "field-1": "3.5"}, {"field-1": "Enter a whole number."}),
        ({"field-0": "a@b.example", "field-1": "x"}, {"field-1": "Enter a number."}),
        (
            {"field-0": "a@b.example", "field-1": "20", "field-2": "2026-02-30"},
            {"field-2": "Enter a date (YYYY-MM-DD)."},
        ),
        (
            {"field-0": "a@b.example", "field-1": "20", "field-3": "no scheme"},
            {"field-3": "Enter a full address, such as https://example.com/."},
        ),
        ({"field-0": "a@b.example", "field-1": "20", "field-4": "xl"}, {"field-4": "Choose one of the options."}),
        ({"field-0": "a@b.example", "field-1": "20", "field-5": ["a", "b", "c"]}, {"field-5": "Choose at most 2."}),
        ({"field-0": "a@b.example", "field-1": "20", "field-5": ["z"]}, {"field-5": "Choose one of the options."}),
    ],
)
def test_a_wrong_form_is_a_400_with_the_fields_errors_and_stays_open(
    user: Any, demo_model: Any, data: dict[str, Any], errors: dict[str, str]
) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(user).post(url_of(request), {"action": "accept", **data})
    assert response.status_code == 400
    assert response.json()["errors"] == errors
    assert answer_of(request) is None
    assert elicitation.pending(redis.from_url(settings.REDIS_URL), request.id) is not None


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        # Python's `re` backtracks through 2^n ways for these: seconds at 28 characters, hours
        # soon after, with the GIL held (every page of the process stalled).
        ("^(a+)+$", "This value has the wrong format."),
        ("^(a|a)*$", "could not be checked against the server's pattern"),
    ],
)
def test_a_hostile_pattern_is_checked_promptly(user: Any, demo_model: Any, pattern: str, error: str) -> None:
    default = "a" * 29 + "!"
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": pattern, "default": default}}}
    _, request = waiting(user, demo_model, schema=schema)
    client = logged_in(user)
    # The request runs in this thread (the test client): its CPU time, which a loaded machine
    # does not stretch as it does the wall clock, bounds the check's work.
    started = time.thread_time()
    response = client.post(url_of(request), {"action": "accept", "field-0": default})
    assert time.thread_time() - started < 2.0
    assert response.status_code == 400
    assert error in response.json()["errors"]["field-0"]
    assert answer_of(request) is None  # still open: the person can correct it or decline
    # A value the pattern takes goes through.
    assert client.post(url_of(request), {"action": "accept", "field-0": "aaaa"}).status_code == 200
    assert answer_of(request) == {"action": "accept", "content": {"name": "aaaa"}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_send_no_content(user: Any, demo_model: Any, action: str) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(user).post(url_of(request), {"action": action, "field-0": "secret@example.com"})
    assert response.status_code == 200
    assert answer_of(request) == {"action": action, "content": None}


def test_done_on_a_page_to_open_accepts_without_content(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model, mode="url")
    response = logged_in(user).post(url_of(request), {"action": "accept", "field-0": "x"})
    assert response.status_code == 200
    assert answer_of(request) == {"action": "accept", "content": None}


def test_someone_elses_question_is_not_found(user: Any, other_user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    response = logged_in(other_user).post(url_of(request), {"action": "cancel"})
    assert response.status_code == 404
    assert answer_of(request) is None


def test_a_question_of_a_turn_that_ended_is_not_found(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model, status=Turn.Status.CANCELLED)
    assert logged_in(user).post(url_of(request), {"action": "cancel"}).status_code == 404


@pytest.mark.parametrize("elicitation_id", ["nope", "a" * 20, "../../etc", "x" * 300])
def test_unknown_questions_are_404(user: Any, elicitation_id: str) -> None:
    assert logged_in(user).post(f"/elicitations/{elicitation_id}/", {"action": "cancel"}).status_code == 404


@pytest.mark.parametrize("action", ["", "approve", "ACCEPT", "timeout"])
def test_a_bad_action_is_400(user: Any, demo_model: Any, action: str) -> None:
    _, request = waiting(user, demo_model)
    assert logged_in(user).post(url_of(request), {"action": action}).status_code == 400
    assert answer_of(request) is None


def test_answers_need_csrf_a_login_and_a_post(user: Any, demo_model: Any) -> None:
    _, request = waiting(user, demo_model)
    assert logged_in(user, csrf=True).post(url_of(request), {"action": "cancel"}).status_code == 403
    assert Client().post(url_of(request), {"action": "cancel"}).status_code == 302
    assert logged_in(user).get(url_of(request)).status_code == 405
    assert answer_of(request) is None


def test_a_hostile_schemas_text_is_escaped_on_the_card(user: Any, demo_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "x": {
                "type": "string",
                "title": "<script>alert(1)</script>",
                "description": "<img src=x onerror=alert(2)>",
                "default": '"><script>alert(3)</script>',
            },
            "y": {"type": "string", "enum": ['"><b>', "ok"], "enumNames": ["<i>evil</i>", "fine"]},
        },
    }
    request = ElicitationRequest(
        "<b>Server</b>",
        "t",
        "form",
        "<script>alert(4)</script>\nsecond line",
        60,
        fields=elicitation_form.form_fields(schema),
    )
    request.deadline = 2_000_000_000
    card = presenters.card(
        1, 0, 0, name="toolset__mcp_x__t", status="waiting", elicitation=presenters.elicitation(request)
    )
    html = presenters.render("chat/_tool_card.html", {"card": card})
    assert "<script>" not in html and "<img" not in html and "<i>evil" not in html and "<b>Server" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(4)&lt;/script&gt;<br>second line" in html
    assert 'value="&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"' in html


def test_a_page_to_open_shows_its_domain_and_opens_in_a_new_tab_without_referrer(user: Any, demo_model: Any) -> None:
    url, domain = elicitation_form.link("https://pay.example:8443/checkout?id=1&x=<y>")
    request = ElicitationRequest("Shop", "t", "url", "Pay here", 60, url=url, domain=domain)
    request.deadline = 2_000_000_000
    card = presenters.card(
        1, 0, 0, name="toolset__mcp_x__t", status="waiting", elicitation=presenters.elicitation(request)
    )
    html = presenters.render("chat/_tool_card.html", {"card": card})
    assert '<strong data-testid="elicitation-domain">pay.example</strong>' in html
    assert (
        'href="https://pay.example:8443/checkout?id=1&amp;x=&lt;y&gt;" target="_blank" rel="noopener noreferrer"'
        in html
    )
    assert "Waiting for your answer" in html and "Needs your answer" in html
