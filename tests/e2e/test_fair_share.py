"""A queued answer on its page: past the person's cap of running answers, a new answer says it
is queued (as it is sent and after a reload), passes axe, and Stop cancels it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat.models import AppSettings, Chat, Turn

from .axe import axe_violations, blocking
from .conftest import send, wait_socket

pytestmark = pytest.mark.e2e


def test_a_queued_answer_says_so_live_and_after_a_reload_and_stop_cancels_it(
    axe_signed_in: Page, e2e_user: Any, demo_model: Any
) -> None:
    page = axe_signed_in
    app = AppSettings.load()
    app.running_turns_per_user = 1
    app.save()
    # Slow enough that the busy answer outlives two page loads, a reload and axe on a loaded machine
    # (at the test stack's 100 tokens/s it once ended first); Stop ends it below.
    demo_model.extra_params = {"tokens_per_second": 10}
    demo_model.save()
    busy, waiting = (Chat.objects.create(owner=e2e_user, model=demo_model) for _ in range(2))

    page.goto(f"{page.base_url}/chats/{busy.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send(page, "[demo:slow] Explain the history of the web in detail.")
    page.wait_for_selector('.turn-state[data-turn-status="running"]', timeout=15_000)

    page.goto(f"{page.base_url}/chats/{waiting.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    send(page, "What is 12*7?")
    note = page.get_by_test_id("queued-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Queued: you have 1 answer running")
    expect(page.get_by_role("status", name="Queued")).to_be_visible()
    assert blocking(axe_violations(page, ".turn")) == []

    page.reload()
    expect(page.get_by_test_id("queued-note")).to_be_visible()

    wait_socket(page)
    page.get_by_test_id("stop-button").click()
    expect(page.locator(".turn-state").last).to_have_attribute("data-turn-status", "cancelled")
    expect(page.get_by_test_id("queued-note")).to_have_count(0)
    turn = Turn.objects.get(chat=waiting)
    assert turn.status == Turn.Status.CANCELLED and turn.started_at is None

    page.goto(f"{page.base_url}/chats/{busy.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    page.get_by_test_id("stop-button").click()
    expect(page.locator(".turn-state").last).to_have_attribute("data-turn-status", "cancelled", timeout=15_000)
