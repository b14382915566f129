"""An MCP server from the admin's form to the reader's card: the admin adds the example server
(stdio), tests the connection, a user selects its tools in the popover, asks, and watches the
card report the server's progress and show the result — the same after a reload."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from toolsets.mcp.models import MCPServer
from toolsets.mcp.setup import EXAMPLE_SCRIPT
from toolsets.models import ToolExecution

from .conftest import PASSWORD, login, normalized_messages, send, shot, wait_socket, wait_turn_done
from .conftest import SHOTS as SHOTS_DIR

pytestmark = pytest.mark.e2e


def add_server_as_admin(browser: Browser, base_url: str) -> None:
    get_user_model().objects.create_superuser("root", password=PASSWORD)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    admin = context.new_page()
    login(admin, base_url, "root")
    admin.goto(base_url + "/admin/mcp/mcpserver/add/")
    admin.fill("#id_name", "Converter")
    admin.fill("#id_slug", "conv")
    admin.select_option("#id_transport", "stdio")
    admin.fill("#id_command", sys.executable)
    admin.fill("#id_args", json.dumps([str(EXAMPLE_SCRIPT)]))
    # Tessera's own example server: its read-only tools may run without asking.
    admin.check("#id_trust_annotations")
    admin.get_by_role("button", name="Save", exact=True).click()
    expect(admin.locator(".messagelist")).to_contain_text("added successfully")
    admin.get_by_role("checkbox", name="Select this object for an action - Converter").check()
    admin.select_option("select[name=action]", "test_and_refresh")
    admin.get_by_role("button", name="Run").click()
    # The server's own name and version, and its tools.
    expect(admin.locator(".messagelist")).to_contain_text("connected to", timeout=30_000)
    expect(admin.locator(".messagelist")).to_contain_text("convert")
    shot(admin, "mcp-admin-refreshed")
    context.close()


def test_admin_adds_a_server_and_a_user_watches_its_tool_work(page: Page, browser: Browser, stack: Any) -> None:
    add_server_as_admin(browser, stack.url)
    assert [t["name"] for t in MCPServer.objects.get(slug="conv").tools] == ["convert", "list_units"]

    page.goto(stack.url + "/")
    send(page, "Hello")
    page.wait_for_url("**/chats/*/")
    wait_socket(page)
    wait_turn_done(page)

    page.get_by_test_id("toolsets-popover-trigger").click()
    row = page.get_by_test_id("toolset-row-mcp_conv")
    expect(row).to_contain_text("Converter")
    page.get_by_test_id("toolset-expand-mcp_conv").click()
    expect(page.get_by_test_id("tool-row-mcp_conv-convert")).to_contain_text("Convert units")
    box = page.get_by_test_id("toolset-checkbox-mcp_conv")
    if not box.is_checked():
        box.check()
    expect(box).to_be_checked()
    shot(page, "mcp-popover")
    page.keyboard.press("Escape")

    send(page, "convert 5 km to miles")
    card = page.locator(".tool-card").last
    # The server's progress notifications, live on the card while it runs. Each lasts 0.4 s,
    # shorter than expect()'s later polling steps (1 s): looked for every 50 ms instead.
    page.wait_for_function(
        """() => [...document.querySelectorAll('.tool-card')]
                 .some((c) => c.textContent.includes('Converting 5 km to mi'))""",
        polling=50,
        timeout=20_000,
    )
    shot(page, "mcp-card-progress")
    wait_turn_done(page)
    expect(card).to_contain_text("Convert units")
    expect(card).to_contain_text("3.10686")
    shot(page, "mcp-card-done")

    record = ToolExecution.objects.get(toolset="mcp_conv")
    assert (record.tool, record.status) == ("convert", "success")

    live = normalized_messages(page)
    page.reload()
    wait_socket(page)
    again = normalized_messages(page)
    if again != live:
        (SHOTS_DIR / "mcp-live.html").write_text(live)
        (SHOTS_DIR / "mcp-reload.html").write_text(again)
    assert again == live


def test_admin_sets_a_pre_registered_oauth_client_whose_secret_is_never_shown_again(
    browser: Browser, stack: Any, transactional_db: Any
) -> None:
    from .axe import axe_violations, blocking, describe

    get_user_model().objects.create_superuser("root", password=PASSWORD)
    # bypass_csp: axe is an injected script (tests/e2e/axe.py).
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    admin = context.new_page()
    login(admin, stack.url, "root")
    admin.goto(stack.url + "/admin/mcp/mcpserver/add/")
    admin.fill("#id_name", "Issuer")
    admin.fill("#id_slug", "issuer")
    admin.fill("#id_url", "https://mcp.example/mcp")
    admin.select_option("#id_credential", "oauth")
    admin.fill("#id_oauth_client_id", "tessera-at-example")
    admin.fill("#id_oauth_client_secret_text", "pre-registered-s3cret")
    admin.get_by_role("button", name="Save and continue editing").click()
    expect(admin.locator(".messagelist")).to_contain_text("added successfully")
    server = MCPServer.objects.get(slug="issuer")
    assert server.oauth_client_id == "tessera-at-example"
    assert server.oauth_client_secret == "pre-registered-s3cret"
    # Write-only: the form never carries it back, and saving without it keeps it.
    assert admin.locator("#id_oauth_client_secret_text").input_value() == ""
    assert "pre-registered-s3cret" not in admin.content()
    admin.locator(".field-credential").scroll_into_view_if_needed()
    shot(admin, "mcp-admin-oauth-client")
    # The Credentials section, which these fields joined (the groups picker above is Django's own).
    violations = blocking(axe_violations(admin, "fieldset:has(.field-oauth_client_id)"))
    assert not violations, describe(violations, "MCP server credentials")
    admin.get_by_role("button", name="Save and continue editing").click()
    expect(admin.locator(".messagelist")).to_contain_text("changed successfully")
    assert MCPServer.objects.get(slug="issuer").oauth_client_secret == "pre-registered-s3cret"
    admin.check("#id_clear_oauth_client_secret")
    admin.get_by_role("button", name="Save and continue editing").click()
    expect(admin.locator(".messagelist")).to_contain_text("changed successfully")
    assert MCPServer.objects.get(slug="issuer").oauth_client_secret == ""
    context.close()
