"""A budget in a browser against the real stack: the answer that would pass it stops with the
budget's message live (over the websocket) and after a reload, keeping its first step; the
account page shows what is left."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from chat.models import Budget, Chat, LLMModel

from .conftest import send_and_wait, shot

pytestmark = pytest.mark.e2e


def test_an_answer_stops_when_the_budget_is_used_up(
    page: Page, stack: Any, e2e_user: Any, demo_model: LLMModel
) -> None:
    demo_model.extra_params = {"tokens_per_second": 0, "max_tokens": 50}
    demo_model.save()
    Budget.objects.create(user=e2e_user, period="month", max_tokens=1)
    chat = Chat.objects.create(owner=e2e_user, model=demo_model, enabled_tools={"clock_math": ["calculate"]})
    page.goto(f"{stack.url}/chats/{chat.pk}/")

    send_and_wait(page, "What is 6*7?")

    error = page.locator(".turn-error").last
    expect(error).to_contain_text("your monthly budget is used up")
    expect(page.locator(".tool-card")).to_have_count(1)  # the step before it is kept
    shot(page, "budget-used-up-live")
    page.reload()
    expect(page.locator(".turn-error").last).to_contain_text("your monthly budget is used up")

    page.goto(f"{stack.url}/account/")
    expect(page.get_by_test_id("budget-left")).to_contain_text("0 of 1 tokens left")
    expect(page.get_by_test_id("budget-left")).to_contain_text("Nearly used up")
    shot(page, "budget-account-page", full_page=True)
