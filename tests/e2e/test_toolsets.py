"""The Toolsets settings page as a user and an admin use it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from toolsets.models import UserToolsetConfig

from .conftest import PASSWORD, login, shot

pytestmark = pytest.mark.e2e


def test_user_adds_exa_key_then_admin_disables_exa(page: Page, browser: Browser, stack: Any) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.get_by_test_id("toolsets-settings-link").click()
    page.wait_for_url("**/toolsets/")
    status = page.get_by_test_id("toolset-status-exa")
    expect(status).to_have_text("API key not configured")
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text("Ready")
    shot(page, "toolsets-before")

    page.get_by_test_id("toolset-key-exa").fill("exa-user-key-9f3c")
    page.get_by_test_id("toolset-card-exa").get_by_role("button", name="Save").click()
    expect(status).to_have_text("Ready")
    expect(page.get_by_test_id("toolset-key-status-exa")).to_contain_text("••••9f3c")
    assert "exa-user-key-9f3c" not in page.content()
    page.reload()
    expect(page.get_by_test_id("toolset-key-exa")).to_have_attribute("placeholder", "••••9f3c")
    expect(page.get_by_test_id("toolset-key-exa")).to_have_value("")
    assert UserToolsetConfig.objects.get(toolset_id="exa").api_key == "exa-user-key-9f3c"
    shot(page, "toolsets-after-key")

    get_user_model().objects.create_superuser("root", password=PASSWORD)
    admin_context = browser.new_context()
    admin = admin_context.new_page()
    login(admin, stack.url, "root")
    admin.goto(stack.url + "/admin/toolsets/toolsetconfig/")
    admin.get_by_role("link", name="Exa web search").click()
    expect(admin.locator("#id_api_key")).to_have_value("")
    admin.get_by_label("Enabled").uncheck()
    admin.get_by_role("button", name="Save", exact=True).click()
    expect(admin.locator(".messagelist")).to_contain_text("changed successfully")
    admin_context.close()

    page.reload()
    expect(status).to_have_text("Disabled by administrator")
    expect(page.get_by_test_id("toolset-key-exa")).to_have_count(0)


def test_user_switches_a_toolset_off_and_on(page: Page) -> None:
    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    card = page.get_by_test_id("toolset-card-clock_math")
    card.locator(".switch").click()
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text("Disabled in settings")
    page.reload()
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text("Disabled in settings")
    page.get_by_test_id("toolset-card-clock_math").locator(".switch").click()
    expect(page.get_by_test_id("toolset-status-clock_math")).to_have_text("Ready")


def test_the_toolsets_page_points_to_api_tokens_on_the_account_page(page: Page) -> None:
    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    page.get_by_test_id("tokens-moved").get_by_role("link", name="your account page").click()
    page.wait_for_url("**/account/#tokens-title")
    expect(page.get_by_test_id("api-tokens")).to_be_visible()
