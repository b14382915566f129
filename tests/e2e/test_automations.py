"""Automations in the browser: create one (with the next run times previewed and a bad schedule
refused clearly), run it now, watch the run finish in its history and the notification arrive
live in the bell, then read it in the notification centre; axe on each new page."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from .axe import axe_violations, blocking, describe
from .conftest import browser_page, shot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def auto_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        yield page


def _wait_socket_open(page: Page) -> None:
    # Each socket's element says when it is open (static/js/chat.js).
    page.wait_for_selector('[ws-connect^="/ws/automations/"][data-ws="open"]', timeout=15_000)


def _no_blocking(page: Page, where: str) -> None:
    found = blocking(axe_violations(page))
    assert not found, describe(found, where)


def test_create_run_now_history_and_notification(browser: Browser, stack: Any, auto_page: Page) -> None:
    page = auto_page
    base = page.base_url  # type: ignore[attr-defined]
    page.goto(f"{base}/")
    page.click('[data-testid="automations-link"]')
    expect(page.locator("h1")).to_have_text("Automations")
    _no_blocking(page, "automations index")

    page.click('[data-testid="new-automation"]')
    page.fill("#id_name", "Morning digest")
    page.fill("#id_prompt", "What time is it in Tokyo?")
    page.fill("#id_schedule", "61 8 * * 1-5")
    expect(page.locator('[data-testid="schedule-preview"]')).to_contain_text("from 0 to 59")
    page.fill("#id_schedule", "0 8 * * 1-5")
    page.select_option("#id_timezone", "Europe/Paris")
    expect(page.locator('[data-testid="schedule-preview"]')).to_contain_text("Next runs (Europe/Paris)")
    page.select_option("#id_notify_on", "always")
    _no_blocking(page, "new automation form")
    shot(page, "automation-form", full_page=True)
    page.click('[data-testid="save-automation"]')
    expect(page.locator("h1")).to_have_text("Morning digest")

    page.click('[data-testid="run-now"]')
    expect(page.locator('[data-testid="run"]')).to_have_count(1)
    # The run ends in the worker; the bell hears of it live over the user socket, and the
    # history its status over the automation's own socket, without a reload.
    expect(page.locator('[data-testid="notify-count"]')).to_have_text("1", timeout=60_000)
    expect(page.locator('[data-testid="run"]').first).to_have_attribute("data-status", "completed", timeout=30_000)
    _no_blocking(page, "automation page")
    shot(page, "automation-runs", full_page=True)
    # A second page of the automation open: a run started elsewhere (here, the first page's
    # Run now) appears in it live, new at the top.
    with browser_page(browser, stack.url) as watcher:
        watcher.goto(page.url)
        _wait_socket_open(watcher)
        page.click('[data-testid="run-now"]')
        watched = watcher.locator('[data-testid="run"]')
        expect(watched).to_have_count(2, timeout=30_000)
        expect(watched.first).to_have_attribute("data-status", "completed", timeout=60_000)
        # The bell is live on this page too (the user socket on every signed-in page).
        expect(watcher.locator('[data-testid="notify-count"]')).to_have_text("2", timeout=30_000)

    page.click('[data-testid="notify-bell"]')
    expect(page.locator("h1")).to_have_text("Notifications")
    expect(page.locator('[data-testid="notification"]').first).to_contain_text("“Morning digest” finished")
    _no_blocking(page, "notification centre")
    shot(page, "notifications", full_page=True)
    page.locator('[data-testid="notification"] button').first.click()
    # The run's chat: titled by its automation and time, marked by its badge (not its title)
    # in the header and the list, linking to the automation.
    expect(page.locator("#chat-title")).to_contain_text("Morning digest · ")
    expect(page.locator("#chat-title")).not_to_contain_text("Run ·")
    header_badge = page.locator(".chat-head [data-testid=run-badge]")
    expect(header_badge).to_contain_text("Morning digest")
    expect(header_badge).to_contain_text("Completed")
    expect(page.locator("#chat-list [data-testid=run-badge]")).to_have_count(2)
    _no_blocking(page, "a run's chat")
    shot(page, "run-chat-badge")
    header_badge.click()
    expect(page.locator("h1")).to_have_text("Morning digest")
    expect(page.locator('[data-testid="notify-count"]')).to_have_text("1")  # the second run's


def test_the_bell_is_on_every_signed_in_page_right_on_load_and_live(auto_page: Page, e2e_user: Any) -> None:
    from notifications.service import notify as _notify

    def notify(*args: Any, **kwargs: Any) -> None:
        # Off Playwright's thread: its event loop runs there, and notify pushes with async_to_sync.
        worker = threading.Thread(target=_notify, args=args, kwargs=kwargs)
        worker.start()
        worker.join()

    page = auto_page
    base = page.base_url  # type: ignore[attr-defined]
    notify(e2e_user.pk, "run_failed", "“Digest” failed", "Provider down", "/automations/", email=False)
    for path in ("/account/", "/knowledge/", "/toolsets/", "/chats/manage/", "/search/?q=x"):
        page.goto(base + path)
        bell = page.get_by_test_id("notify-bell")
        expect(bell).to_be_visible()
        expect(page.get_by_test_id("notify-count")).to_have_text("1")  # right on load
    page.goto(base + "/account/")
    page.wait_for_selector('.notify-socket[data-ws="open"]', state="attached", timeout=15_000)
    notify(e2e_user.pk, "run_completed", "“Digest” finished", "", "/automations/", email=False)
    expect(page.get_by_test_id("notify-count")).to_have_text("2", timeout=15_000)  # live
    _no_blocking(page, "account page with the bell")
    shot(page, "bell-on-account-page")
    page.get_by_test_id("notify-bell").click()
    expect(page.locator("h1")).to_have_text("Notifications")
    expect(page.get_by_test_id("notify-bell")).to_have_count(1)


def test_an_automation_held_as_an_agent_and_its_badge_live_in_the_list(
    browser: Browser, stack: Any, auto_page: Page
) -> None:
    from django.contrib.auth.models import Group

    from chat.models import AgentDefinition

    AgentDefinition.objects.create(
        name="Clock expert", slug="clock_expert", description="Times and dates",
        instructions="You are the clock expert of the Tokyo office.", toolsets=["clock_math"],
    )  # fmt: skip
    secret = AgentDefinition.objects.create(
        name="Board secretary", slug="board_secretary", description="Minutes", instructions="x"
    )
    secret.groups.add(Group.objects.create(name="Board"))
    page = auto_page
    base = page.base_url  # type: ignore[attr-defined]
    page.goto(f"{base}/automations/new/")
    agent = page.locator("#id_agent")
    # Only the agents ada may use: the board's agent is not hers.
    expect(agent.locator("option[value=clock_expert]")).to_have_count(1)
    expect(agent.locator("option[value=board_secretary]")).to_have_count(0)
    page.fill("#id_name", "Tokyo clock")
    page.fill("#id_prompt", "What time is it in Tokyo?")
    agent.select_option("clock_expert")
    page.fill("#id_schedule", "0 8 * * 1-5")
    expect(page.locator('[data-testid="schedule-preview"]')).to_contain_text("Next runs")
    _no_blocking(page, "automation form with an agent")
    shot(page, "automation-form-agent", full_page=True)
    page.click('[data-testid="save-automation"]')
    expect(page.locator("h1")).to_have_text("Tokyo clock")
    expect(page.get_by_test_id("automation-agent")).to_have_text("Clock expert")
    _no_blocking(page, "automation page with an agent")
    shot(page, "automation-agent-detail", full_page=True)
    detail = page.url

    # The list open in another tab, its socket open, marked so that a reload would show.
    with browser_page(browser, stack.url, bypass_csp=True) as watcher:
        watcher.goto(f"{base}/automations/")
        _wait_socket_open(watcher)
        row = watcher.get_by_test_id("automation-row").filter(has_text="Tokyo clock")
        expect(row.get_by_test_id("automation-agent")).to_have_text("Agent: Clock expert")
        badge = row.get_by_test_id("last-run")
        expect(badge).to_have_attribute("data-status", "none")
        watcher.evaluate(
            """() => {
              window.notReloaded = true;
              window.seenStatuses = [];
              new MutationObserver(() => {
                const badge = document.querySelector('[data-testid=last-run]');
                if (badge) window.seenStatuses.push(badge.dataset.status);
              }).observe(document.querySelector('[data-testid=automations]'), {childList: true, subtree: true});
            }"""
        )
        page.goto(detail)
        page.click('[data-testid="run-now"]')
        expect(badge).to_have_attribute("data-status", "completed", timeout=60_000)
        expect(badge).to_contain_text("Completed")
        assert watcher.evaluate("window.notReloaded") is True
        seen = watcher.evaluate("window.seenStatuses")
        assert "running" in seen and seen[-1] == "completed", seen
        _no_blocking(watcher, "automations list with a live badge")
        shot(watcher, "automations-list-badge", full_page=True)

    # The run was held as the agent: its chat used the agent's clock tools.
    expect(page.locator('[data-testid="run"]').first).to_have_attribute("data-status", "completed", timeout=30_000)
    page.locator('[data-testid="run"] a').first.click()
    expect(page.locator("#chat-title")).to_contain_text("Tokyo clock · ")
    expect(page.get_by_test_id("chat-agent")).to_contain_text("Clock expert")
    expect(page.locator('[data-testid="tool-call-message"][data-tool*="time"]').first).to_be_visible()
    _no_blocking(page, "a run's chat held as an agent")
    shot(page, "agent-run-chat")
