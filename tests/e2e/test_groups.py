"""Groups decide access, in a browser against the real stack: an admin limits a toolset to a
group in Django admin; a user outside it sees why in the tools popover, on the settings page and
in the answer (the worker skips it); a chat whose model the user lost says so and falls back;
joining the group counts from the next page and turn."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import Browser, Page, expect

from chat.models import Chat, LLMModel
from toolsets.models import ToolExecution

from .conftest import PASSWORD, login, send_and_wait, shot

pytestmark = pytest.mark.e2e

NOT_IN_GROUPS = "Not available to your groups"


def test_an_admin_limits_a_toolset_and_a_model_to_a_group(
    page: Page, browser: Browser, stack: Any, e2e_user: Any, demo_model: LLMModel
) -> None:
    staff = Group.objects.create(name="staff")
    demo_model.extra_params = {"tokens_per_second": 0}
    demo_model.save()
    limited = LLMModel.objects.create(name="Staff GPT", model="openai/staff-only")
    limited.groups.add(staff)
    chat = Chat.objects.create(owner=e2e_user, model=limited, enabled_tools={"clock_math": ["calculate"]})

    get_user_model().objects.create_superuser("root", password=PASSWORD)
    admin_context = browser.new_context()
    admin = admin_context.new_page()
    login(admin, stack.url, "root")
    admin.goto(stack.url + "/admin/toolsets/toolsetconfig/")
    admin.get_by_role("link", name="Clock & math", exact=False).first.click()
    admin.select_option("#id_groups_from", label="staff")
    admin.click("#id_groups_add")
    admin.get_by_role("button", name="Save", exact=True).click()
    expect(admin.locator(".messagelist")).to_contain_text("changed successfully")
    expect(admin.locator("td.field-for_groups").filter(has_text="staff")).to_have_count(1)
    admin_context.close()

    page.goto(f"{stack.url}/chats/{chat.pk}/")
    expect(page.get_by_test_id("composer-model-notice")).to_have_text(
        "Staff GPT is not available to you any more: new messages use Demo (offline)."
    )
    page.get_by_test_id("toolsets-popover-trigger").click()
    expect(page.get_by_test_id("toolset-reason-clock_math")).to_have_text(NOT_IN_GROUPS)
    expect(page.get_by_test_id("toolset-checkbox-clock_math")).to_be_disabled()
    shot(page, "groups-not-in-group")
    page.keyboard.press("Escape")

    # The real worker runs the turn with the fallback model and without the limited toolset.
    send_and_wait(page, "What is 6*7?")
    expect(page.locator(".turn-state .notice").last).to_have_text(
        f"Not available for this answer: Clock & math ({NOT_IN_GROUPS})."
    )
    shot(page, "groups-answer-notice")
    page.reload()  # the chat took the fallback model: nothing to say any more
    expect(page.get_by_test_id("composer-model-notice")).to_have_count(0)
    chat.refresh_from_db()
    assert chat.model == demo_model
    assert not ToolExecution.objects.filter(turn__chat=chat).exists()

    page.goto(f"{stack.url}/toolsets/")
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text(NOT_IN_GROUPS)
    expect(page.get_by_test_id("toolset-enable-clock_math")).to_have_count(0)
    shot(page, "groups-settings-page")

    e2e_user.groups.add(staff)
    page.reload()
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text("Ready")
    page.goto(f"{stack.url}/chats/{chat.pk}/")
    send_and_wait(page, "What is 6*7?")
    expect(page.locator(".turn").last).to_contain_text("42")
    assert ToolExecution.objects.filter(turn__chat=chat, toolset="clock_math").count() == 1
    shot(page, "groups-after-joining")
