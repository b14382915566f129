"""A real Daphne and Celery worker: a PDF is uploaded over HTTP, read by the worker's sandboxed
extractor, sent with a question; the demo model calls the Files tool, which reads it, and the
answer cites it with a link to the passage."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import Client

from chat.models import Chat, Message, Turn
from toolsets.files.models import Attachment
from toolsets.models import ToolExecution

from . import samples

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _http(stack: Any, user: Any) -> tuple[httpx.Client, str]:
    client = Client()
    client.force_login(user)
    http = httpx.Client(
        base_url=stack.url, cookies={settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    )
    http.get("/")
    return http, http.cookies["csrftoken"]


def _upload(http: httpx.Client, csrf: str, name: str, data: bytes) -> dict[str, Any]:
    response = http.post("/files/", files={"file": (name, data)}, headers={"X-CSRFToken": csrf})
    assert response.status_code == 201, response.text
    body = response.json()
    deadline = time.monotonic() + 30
    while body["status"] == "pending" and time.monotonic() < deadline:
        time.sleep(0.2)
        body = http.get(body["status_url"]).json()
    return body


def _answer(turn: Turn, timeout: float = 60) -> Turn:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turn.refresh_from_db()
        if not turn.is_active:
            return turn
        time.sleep(0.2)
    raise AssertionError("the turn did not finish")


def test_the_agent_reads_an_attached_pdf_and_cites_it(stack: Any, user: Any, demo_model: Any) -> None:
    http, csrf = _http(stack, user)
    pdf = samples.pdf(["Quarterly report. Revenue grew by 12 percent this quarter.", "Costs stayed flat."])
    body = _upload(http, csrf, "report.pdf", pdf)
    assert body["status"] == "ready", body
    chat = Chat.objects.create(owner=user, model=demo_model, enabled_tools={})
    response = http.post(
        f"/chats/{chat.pk}/messages/",
        data={"content": "Summarize the attached file", "attachments": str(body["id"])},
        headers={"X-CSRFToken": csrf, "HX-Request": "true"},
    )
    assert response.status_code == 200, response.text
    assert "report.pdf" in response.text and 'data-testid="message-file"' in response.text
    turn = _answer(Turn.objects.filter(chat=chat).latest("id"))
    assert turn.status == Turn.Status.COMPLETED, turn.error
    execution = ToolExecution.objects.get(turn=turn)
    assert (execution.toolset, execution.tool, execution.status) == ("files", "read_file", "success")
    assert execution.arguments == {"file_id": body["id"]}
    assert execution.sources and execution.sources[0]["url"].startswith(f"/files/{body['id']}/?from=")
    answer = Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT).latest("id").content
    assert "**report.pdf** (pages 1–2 of 2) in short: Quarterly report. Revenue grew by 12 percent" in answer
    assert "[1]" in answer
    page = http.get(f"/chats/{chat.pk}/").text
    assert 'class="cite"' in page and f'href="/files/{body["id"]}/?from=' in page.replace("&amp;", "&")


def test_a_hostile_file_fails_on_its_own_and_the_worker_carries_on(stack: Any, user: Any) -> None:
    http, csrf = _http(stack, user)
    bomb = _upload(http, csrf, "bomb.docx", samples.zip_bomb_docx())
    assert bomb["status"] == "failed" and "ZIP bomb" in bomb["error"]
    pages = _upload(http, csrf, "pages.pdf", samples.million_page_pdf())
    assert pages["status"] == "failed" and "1,000,000 pages" in pages["error"]
    fine = _upload(http, csrf, "fine.csv", b"a,b\n1,2\n")
    assert fine["status"] == "ready" and fine["kind"] == "csv"
    assert Attachment.objects.filter(owner=user, status="pending").count() == 0
