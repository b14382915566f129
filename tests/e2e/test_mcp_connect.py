"""Connect for an OAuth MCP server in a real browser: a CSRF-checked POST from the toolset's
card, a Tessera page that moves on to the provider by itself (the page's CSP keeps
`form-action 'self'`, which Chrome would apply to a form's redirect to the provider), the
provider's consent (the local authorization server approves at once), the callback, and the
card saying Connected."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.e2e.axe import axe_violations, blocking
from tests.toolsets.mcp.conftest import SERVER, register, seen_by_stack, serve
from toolsets.mcp.models import MCPServer, OAuthGrant

from .conftest import shot

pytestmark = pytest.mark.e2e


@pytest.fixture
def provider(stack: Any, e2e_user: Any) -> Iterator[tuple[str, MCPServer]]:
    """An MCP server that is its own OAuth authorization server, added by the admin. It lists
    nothing before someone connects: the first connection discovers its tools."""
    for port in serve(SERVER.with_name("oauth_server.py"), "{port}"):
        base = f"http://127.0.0.1:{port}"
        # Off Playwright's thread, which runs its own event loop.
        with ThreadPoolExecutor(1) as thread:
            server = thread.submit(
                register, name="Calendar", slug="cal", transport="http", url=f"{base}/mcp", credential="oauth"
            ).result()
        seen_by_stack()
        yield base, server


def connecting(page: Page, base_url: str, provider: str) -> str:
    """Presses Connect on the toolset's card; returns the provider URL the page that follows
    moved on to by itself. That first trip is answered 204, so the browser stays on the page."""
    connect = page.get_by_test_id("mcp-connect-mcp_cal")
    for _ in range(20):  # the web process rereads the servers every couple of seconds
        page.goto(base_url + "/toolsets/")
        if connect.count():
            break
        page.wait_for_timeout(500)
    expect(connect).to_have_js_property("tagName", "BUTTON")
    went: list[str] = []

    def stay(route: Route) -> None:
        went.append(route.request.url)
        route.fulfill(status=204)

    page.route(f"{provider}/authorize**", stay)
    connect.click()
    expect(page.get_by_role("heading", name="Connecting to Calendar")).to_be_visible()
    for _ in range(50):
        if went:
            break
        page.wait_for_timeout(100)
    page.unroute(f"{provider}/authorize**")
    assert went, "the page did not move on to the provider by itself"
    href = page.get_by_test_id("mcp-connect-continue").get_attribute("href") or ""
    assert href.startswith(f"{provider}/authorize?") and went[0] == href, (href, went)
    return href


def test_connect_posts_then_moves_on_to_the_provider_and_back(
    page: Page, stack: Any, e2e_user: Any, provider: tuple[str, MCPServer]
) -> None:
    base, server = provider
    page.goto(stack.url + "/toolsets/")
    connecting(page, stack.url, base)
    shot(page, "mcp-connecting")
    # The user goes on (the page would have): consent, the callback, back on the card.
    page.get_by_test_id("mcp-connect-continue").click()
    page.wait_for_url("**/toolsets/**")
    connected = page.get_by_test_id("mcp-connected-mcp_cal")
    expect(connected).to_be_visible(timeout=15_000)
    connected.scroll_into_view_if_needed()
    shot(page, "mcp-connected")
    assert OAuthGrant.objects.get(server=server, user=e2e_user).connected
    # The page's console had no CSP refusal: `browser_page` fails the test on any console error.


def test_the_connect_button_and_the_connecting_page_pass_axe(
    axe_signed_in: Page, stack: Any, provider: tuple[str, MCPServer]
) -> None:
    page = axe_signed_in
    page.goto(stack.url + "/toolsets/")
    connect = page.get_by_test_id("mcp-connect-mcp_cal")
    for _ in range(20):
        if connect.count():
            break
        page.wait_for_timeout(500)
        page.goto(stack.url + "/toolsets/")
    connect.scroll_into_view_if_needed()
    shot(page, "mcp-connect-card")
    assert not blocking(axe_violations(page, "[data-testid=toolset-card-mcp_cal]"))
    connecting(page, stack.url, provider[0])
    assert not blocking(axe_violations(page)), axe_violations(page)
