"""The page's own controls cannot be impersonated by content, and the page shows a turn's
real state while it runs."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from chat.models import Turn

from .conftest import send, shot, wait_socket

pytestmark = pytest.mark.e2e


def test_running_state_is_shown_and_esc_presses_the_real_stop(page: Page) -> None:
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    send(page, "Tell me a long story [demo:slow]")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    # The worker's claim reaches the page: "running", not "waiting for a worker".
    state = page.locator('[id^="turn-state-"]').last
    expect(state).to_have_attribute("data-turn-status", "running", timeout=10_000)
    expect(state.locator(".thinking")).to_have_attribute("aria-label", "Working")
    expect(page.locator(".turn .md").last).not_to_be_empty(timeout=10_000)

    # Content that looks like the page's controls (what an answer with `<code class="stop-btn">`
    # would have been before sanitising dropped such classes) sits before the real ones.
    page.evaluate(
        """() => {
            const content = document.querySelector('.turn .md');
            content.insertAdjacentHTML('afterbegin',
              '<code class="stop-btn" data-testid="fake">x</code><span class="tsp-trigger">y</span>');
        }"""
    )
    page.locator("body").press("Escape")

    expect(page.locator(".stopped-label")).to_be_visible(timeout=5_000)
    assert Turn.objects.get().status == Turn.Status.CANCELLED
    shot(page, "stopped-with-fake-controls")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_sidebar_foot_shows_the_name_and_every_action_inside_the_sidebar(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(page.base_url + "/")  # type: ignore[attr-defined]
    if width < 700:
        page.locator("[data-action=open-sidebar]").first.click()
        expect(page.locator(".sidebar")).to_be_in_viewport(ratio=1)  # slid in
    foot = page.locator(".sidebar-foot")
    expect(foot).to_be_visible()
    name = foot.locator(".user-name")
    # Not squeezed to an ellipsis by the actions beside it.
    assert name.evaluate("el => el.scrollWidth <= el.clientWidth + 1 && el.clientWidth > 20")
    bounds = page.locator(".sidebar").bounding_box()
    assert bounds is not None
    for action in foot.locator(".sidebar-actions .icon-btn").all():
        box = action.bounding_box()
        assert box is not None
        assert bounds["x"] <= box["x"] and box["x"] + box["width"] <= bounds["x"] + bounds["width"], box
    shot(page, f"sidebar-foot-{width}")
