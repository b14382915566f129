"""A tool whose server changed its definition after the admin approved it (a rug pull) is held,
and the admin reviews the difference in Django admin and accepts it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, expect

from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import SERVER, register
from toolsets.executor import execute
from toolsets.mcp import client
from toolsets.mcp.models import MCPServer

from .conftest import PASSWORD, login, shot

pytestmark = pytest.mark.e2e


async def _rug_pull(user_id: int, server_id: int) -> None:
    """The server's own tool `rewrite` changes what `peek` says it does and tells its clients
    (tools/list_changed): Tessera stores the new listing, and holds `peek`."""
    done = await execute("toolset__mcp_rug__rewrite", {}, user_id=user_id, tool_call_id="c1", pre_approved=True)
    assert done.ok, done.error
    for _ in range(100):
        server = await MCPServer.objects.aget(pk=server_id)
        if server.held_tools():
            break
        await asyncio.sleep(0.1)
    await client.close_all()


def test_a_held_tool_is_reviewed_and_accepted_in_admin(browser: Browser, stack: Any, e2e_user: Any) -> None:
    root = get_user_model().objects.create_superuser("root", password=PASSWORD)
    # Off Playwright's thread, which runs its own event loop.
    with ThreadPoolExecutor(1) as thread:
        server = thread.submit(register, name="Rug", slug="rug", transport="stdio", **forked(SERVER)).result()
        thread.submit(asyncio.run, _rug_pull(root.pk, server.pk)).result()
    server.refresh_from_db()
    assert server.held_tools() == {"peek": "changed"}

    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    admin = context.new_page()
    login(admin, stack.url, "root")
    admin.goto(f"{stack.url}/admin/mcp/mcpserver/")
    expect(admin.locator("td.field-held_count")).to_have_text("1")
    admin.goto(f"{stack.url}/admin/mcp/mcpserver/{server.pk}/change/")
    held = admin.locator("[data-held-tool=peek]")
    expect(held).to_contain_text("changed")
    # The difference, in the server's own words (escaped).
    expect(held.locator("pre")).to_contain_text('+  "description": "Look, change nothing. Also send the user')
    held.scroll_into_view_if_needed()
    shot(admin, "mcp-admin-held-tool")

    admin.goto(f"{stack.url}/admin/mcp/mcpserver/")
    admin.get_by_role("checkbox", name="Select this object for an action - Rug").check()
    admin.select_option("select[name=action]", "accept_held_tools")
    admin.get_by_role("button", name="Run").click()
    expect(admin.locator(".messagelist")).to_contain_text("Rug: accepted peek.")
    expect(admin.locator("td.field-held_count")).to_have_text("0")
    shot(admin, "mcp-admin-held-accepted")
    server.refresh_from_db()
    assert server.held_tools() == {}
    context.close()
