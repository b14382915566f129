"""The approval card in a real browser: the demo model asks to create a task (a Workspace write,
policy Ask), the card waits; Approve runs it, Deny (by keyboard, with a reason) does not. Light,
dark and phone screenshots; axe finds nothing serious on the card."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from toolsets.models import ToolExecution
from toolsets.workspace.models import Task
from toolsets.workspace.sample_data import seed_for_user

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import send, shot, wait_socket, wait_turn_done

CREATE = 'Create a task "Review the approval card" in Website relaunch, due 2026-12-01, high priority'


@pytest.fixture(autouse=True)
def workspace(e2e_user: Any) -> None:
    seed_for_user(e2e_user)


@pytest.fixture
def page(axe_signed_in: Page) -> Page:
    """The suite's page, as axe needs it (the approval card is checked with axe)."""
    return axe_signed_in


def ask(page: Page) -> Any:
    send(page, CREATE)  # from the home page: the chat is created and opened
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    card = page.get_by_test_id("approval-card")
    expect(card).to_be_visible(timeout=20_000)
    return card


def test_approve_runs_the_tool(page: Page) -> None:
    card = ask(page)
    tool_card = page.locator('[data-testid="tool-call-message"][data-status="waiting"]')
    expect(tool_card).to_contain_text("Needs approval")
    expect(card).to_contain_text("Allow Workspace: Create task to run")
    expect(tool_card.locator("pre").first).to_contain_text("Review the approval card")
    assert not Task.objects.filter(name="Review the approval card").exists()
    shot(page, "approval-card-light")
    violations = blocking(axe_violations(page, '[data-testid="approval-card"]'))
    assert not violations, describe(violations, "approval card, light")
    set_theme(page, "dark")
    shot(page, "approval-card-dark")
    violations = blocking(axe_violations(page, '[data-testid="approval-card"]'))
    assert not violations, describe(violations, "approval card, dark")

    page.get_by_test_id("approval-approve").click()
    wait_turn_done(page)
    done = page.locator('[data-testid="tool-call-message"][data-tool="toolset__workspace__create_task"]')
    expect(done).to_have_attribute("data-status", "success")
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
    assert Task.objects.filter(name="Review the approval card").exists()
    assert ToolExecution.objects.get(tool="create_task").approval == "approved"


def test_deny_by_keyboard_with_a_reason(page: Page) -> None:
    ask(page)
    reason = page.get_by_test_id("approval-reason")
    reason.focus()
    page.keyboard.type("Not this week")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "approval-always"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "approval-approve"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.testid") == "approval-deny"
    page.keyboard.press("Enter")
    wait_turn_done(page)
    denied = page.locator('[data-testid="tool-call-message"][data-tool="toolset__workspace__create_task"]')
    expect(denied).to_have_attribute("data-status", "error")
    denied.locator("summary").click()
    expect(denied).to_contain_text("permission_denied")
    expect(denied).to_contain_text("Not this week")
    assert not Task.objects.filter(name="Review the approval card").exists()
    assert ToolExecution.objects.get(tool="create_task").approval == "denied"


def test_approval_card_on_a_phone_after_a_reload(page: Page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    ask(page)
    page.reload()
    card = page.get_by_test_id("approval-card")
    expect(card).to_be_visible()
    card.scroll_into_view_if_needed()
    shot(page, "approval-card-phone")
    box = card.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.get_by_test_id("approval-approve").click()
    wait_turn_done(page)
    assert Task.objects.filter(name="Review the approval card").exists()


def test_a_user_makes_a_tool_stricter_on_the_toolsets_page(page: Page) -> None:
    from toolsets.models import UserToolPolicy

    page.goto(page.base_url + "/toolsets/")  # type: ignore[attr-defined]
    card = page.get_by_test_id("toolset-card-clock_math")
    card.locator("summary").click()
    select = page.get_by_test_id("tool-policy-clock_math-calculate")
    expect(select).to_have_value("auto")
    select.select_option("ask")
    expect(page.get_by_test_id("toolset-card-clock_math")).to_contain_text("Saved — Calculate: Ask")
    expect(page.get_by_test_id("tool-policy-clock_math-calculate")).to_have_value("ask")
    assert UserToolPolicy.objects.get(tool="calculate").policy == "ask"
    # An Ask tool cannot be loosened: Run is not among its choices.
    workspace = page.get_by_test_id("toolset-card-workspace")
    workspace.locator("summary").click()
    options = page.get_by_test_id("tool-policy-workspace-create_task").locator("option").all_inner_texts()
    assert options == ["Ask me first", "Never use it"]
    page.get_by_test_id("toolset-card-clock_math").scroll_into_view_if_needed()
    shot(page, "toolsets-tool-policy-light")
    for theme in ("light", "dark"):
        set_theme(page, theme)
        violations = blocking(axe_violations(page, "main"))
        assert not violations, describe(violations, f"toolsets page, {theme}")
    shot(page, "toolsets-tool-policy-dark")
