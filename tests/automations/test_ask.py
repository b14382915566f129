"""An Ask tool in a run, with the real worker: the run waits, its owner is notified (in the
notification centre, with a link to the run's chat), approves from there, and the run ends
completed with the tool's work done."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import transaction
from django.test import Client

from automations import runs
from automations.models import Automation, AutomationRun
from notifications.models import Notification
from toolsets.workspace.models import Task
from toolsets.workspace.sample_data import seed_for_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

APPROVAL = re.compile(r'data-approval="([A-Za-z0-9_-]{16,64})"')


def _until(condition: Any, within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(what)


def test_an_ask_tool_waits_notifies_and_runs_after_approval(stack: Any, user: Any, demo_model: Any) -> None:
    seed_for_user(user)
    automation = Automation.objects.create(
        owner=user, name="Task maker", prompt='Create a task "Ship the approval card" in Website relaunch',
        model=demo_model, trigger="webhook", notify_on=Automation.Notify.WAITING,
        enabled_tools={"workspace": ["create_task", "list_projects"]},
    )  # fmt: skip
    with transaction.atomic():
        run = AutomationRun.objects.create(automation=automation, origin="manual")
        runs.start(run)

    note = _until(lambda: Notification.objects.filter(user=user, kind="run_waiting").first(), 90, "no notification")
    run.refresh_from_db()
    assert run.status == "waiting" and not Task.objects.filter(name="Ship the approval card").exists()
    assert note.url == f"/chats/{run.chat_id}/" and "waits for your approval" in note.title

    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    http = httpx.Client(base_url=stack.url, cookies=cookies, timeout=30)
    assert "notify-count" in http.get("/notifications/").text
    http.get("/notifications/")
    opened = http.post(f"/notifications/{note.pk}/open/", headers={"X-CSRFToken": http.cookies["csrftoken"]})
    assert opened.status_code == 302 and opened.headers["location"] == note.url
    page = http.get(note.url).text
    approval = APPROVAL.search(page)
    assert approval, page[-2000:]
    answer = http.post(f"/approvals/{approval.group(1)}/", data={"decision": "approve"},
                       headers={"X-CSRFToken": http.cookies["csrftoken"]})  # fmt: skip
    assert answer.status_code == 200, answer.text
    _until(lambda: AutomationRun.objects.filter(pk=run.pk, status="completed").exists(), 90, "the run did not finish")
    assert Task.objects.filter(name="Ship the approval card", user=user).exists()
    assert Notification.objects.get(pk=note.pk).read
