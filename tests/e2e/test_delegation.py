"""Subagents as a user sees them: a delegation card that streams the agent's work live, with its
own tool cards inside, identical after a reload; two at once; and Stop."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from chat.models import Turn
from toolsets.models import ToolExecution

from .conftest import normalized_messages, send, shot, wait_socket, wait_turn_done
from .test_components import set_up_workspace

pytestmark = pytest.mark.e2e

PLAN = "Plan my week from my calendar and tasks"
CARD = '[data-tool-card][data-tool="delegate_to_{}"]'


def test_delegation_card_streams_nested_cards_and_text_then_reloads_identically(page: Page) -> None:
    set_up_workspace(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, PLAN)
    page.wait_for_url("**/chats/*/")
    card = page.locator(CARD.format("workspace_assistant")).first
    expect(card).to_be_visible(timeout=15_000)
    expect(card.locator(":scope > summary").get_by_test_id("tool-call-summary")).to_have_text(
        "Workspace assistant is working on it…"
    )
    # The subagent's own calls appear as cards inside the delegation card, and its text streams
    # into the card while it is still working.
    nested = card.locator("[data-testid=delegation] [data-tool-card]")
    expect(nested).to_have_count(2, timeout=15_000)
    expect(nested.first).to_contain_text("Workspace: List events")
    page.wait_for_function(
        """() => { const c = document.querySelector('[data-tool="delegate_to_workspace_assistant"]');
                   const text = c ? [...c.querySelectorAll('[data-testid=delegation] .md')]
                     .map((md) => md.innerText.trim()).join('') : '';
                   return c && c.dataset.status === 'calling' && text.length > 20; }""",
        timeout=20_000,
    )
    shot(page, "delegation-streaming")
    # A reload mid-delegation picks the card up exactly where it is and keeps streaming into it.
    page.reload()
    wait_socket(page)
    card = page.locator(CARD.format("workspace_assistant")).first
    expect(card.locator("[data-testid=delegation] [data-tool-card]")).to_have_count(2)
    wait_turn_done(page, 60_000)
    expect(card).to_have_attribute("data-status", "success")
    expect(card.get_by_test_id("delegation-done")).to_have_text("Workspace assistant finished.")
    result = card.get_by_test_id("delegation-result")
    expect(result).not_to_have_attribute("open", "")
    final = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == final

    # Screenshots of the finished card, opened, at desktop and phone width, light and dark.
    card = page.locator(CARD.format("workspace_assistant")).first
    card.locator("summary").first.click()
    card.get_by_test_id("delegation-result").locator("summary").click()
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        page.set_viewport_size({"width": 1280, "height": 900})
        card.scroll_into_view_if_needed()
        shot(page, f"delegation-desktop-{theme}")
        page.set_viewport_size({"width": 390, "height": 844})
        card.scroll_into_view_if_needed()
        shot(page, f"delegation-phone-{theme}")


def test_two_delegations_run_side_by_side(page: Page) -> None:
    set_up_workspace(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    page.evaluate(
        """() => { window.__both = false; new MutationObserver(() => {
             const calling = document.querySelectorAll('[data-tool^="delegate_to_"][data-status="calling"]');
             if (calling.length === 2) window.__both = true;
           }).observe(document.body, {subtree: true, childList: true, attributes: true}); }"""
    )
    send(page, "Research Django Channels in depth and plan my week from my calendar and tasks")
    page.wait_for_url("**/chats/*/")
    page.evaluate(
        """() => { window.__both = false; new MutationObserver(() => {
             const calling = document.querySelectorAll('[data-tool^="delegate_to_"][data-status="calling"]');
             if (calling.length === 2) window.__both = true;
           }).observe(document.body, {subtree: true, childList: true, attributes: true}); }"""
    )
    expect(page.locator('[data-tool^="delegate_to_"]')).to_have_count(2, timeout=15_000)
    wait_turn_done(page, 60_000)
    assert page.evaluate("window.__both"), "the two delegations were never running at the same time"
    expect(page.locator(CARD.format("researcher"))).to_have_attribute("data-status", "success")
    expect(page.locator(CARD.format("workspace_assistant"))).to_have_attribute("data-status", "success")


def test_stop_during_a_delegation_stops_the_subagent(page: Page) -> None:
    set_up_workspace(page)
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, PLAN)
    page.wait_for_url("**/chats/*/")
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid=delegation] .md')]
                   .map((md) => md.innerText.trim()).join('').length > 10""",
        timeout=20_000,
    )
    page.get_by_test_id("stop-button").click()
    wait_turn_done(page, 15_000)
    turn = Turn.objects.get()
    assert turn.status == Turn.Status.CANCELLED
    card = page.locator(CARD.format("workspace_assistant")).first
    expect(card).to_have_attribute("data-status", "cancelled")
    expect(card.locator(":scope > summary").get_by_test_id("tool-call-summary")).to_have_text(
        "Workspace assistant was stopped."
    )
    delegation = ToolExecution.objects.get(toolset="agents")
    assert delegation.status == "cancelled"
    assert not ToolExecution.objects.filter(status="running").exists()
    # After a reload the card is the same.
    before = normalized_messages(page)
    page.reload()
    wait_socket(page)
    assert normalized_messages(page) == before
