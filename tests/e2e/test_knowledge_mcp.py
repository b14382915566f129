"""An MCP resource added to a knowledge base in the browser: read by the real files worker
through the MCP server, indexed, shown ready; axe on the base page with the resource form."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.stdio_servers import forked
from tests.toolsets.mcp.conftest import register, seen_by_stack

from .axe import axe_violations, blocking, describe
from .conftest import browser_page, shot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]
SERVER = Path(__file__).resolve().parents[1] / "toolsets" / "mcp" / "prompts_server.py"


@pytest.fixture
def kb_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        yield page


def test_a_resource_of_an_mcp_server_becomes_a_searchable_document(kb_page: Page, e2e_user: Any) -> None:
    from knowledge.models import KnowledgeBase

    # Off Playwright's thread: discovering the server's tools runs an event loop of its own.
    with ThreadPoolExecutor(1) as pool:
        fields = {"name": "Notes server", "slug": "ns", "transport": "stdio", **forked(SERVER)}
        pool.submit(register, **fields).result()
    # The stack's processes learn of the new server before the page is asked for.
    seen_by_stack()
    base = KnowledgeBase.objects.create(owner=e2e_user, name="Notes")
    page = kb_page
    page.goto(f"{page.base_url}/knowledge/{base.pk}/")  # type: ignore[attr-defined]
    page.get_by_test_id("kb-resource-server").select_option("ns")
    # Picked from what the server lists (a typed address is the next test's way).
    page.get_by_test_id("kb-list-resources").click()
    picks = page.get_by_test_id("kb-pick")
    # The web process starts the server and asks it (seconds on a loaded machine).
    expect(picks).to_have_count(3, timeout=30_000)  # its templates have no single address: not listed
    expect(page.get_by_test_id("kb-resource-list")).to_contain_text("Today's notes")
    shot(page, "knowledge-mcp-pick", full_page=True)
    listed = blocking(axe_violations(page))
    page.get_by_label("Today's notes").check()
    page.get_by_test_id("kb-add-picked").click()

    expect(page.locator('[data-testid="kb-doc"][data-status="ready"]')).to_have_count(1, timeout=60_000)
    expect(page.get_by_test_id("kb-doc").first).to_contain_text("Notes server: notes://today")
    shot(page, "knowledge-mcp-resource", full_page=True)
    found = blocking(axe_violations(page))
    assert not found, describe(found, "knowledge base with an MCP resource")
    assert not listed, describe(listed, "an MCP server's resources to pick from")


FOLDER_SERVER = Path(__file__).resolve().parents[1] / "knowledge" / "folder_server.py"


def test_refresh_now_reads_mcp_resources_again_and_each_shows_when_it_was_checked(
    kb_page: Page, e2e_user: Any, tmp_path: Path
) -> None:
    from knowledge.models import Document, KnowledgeBase

    (tmp_path / "guide.md").write_text("# Guide\n\nThe kettle is in the kitchen.\n")
    (tmp_path / "rota.md").write_text("# Rota\n\nAda waters the plants on Mondays.\n")
    with ThreadPoolExecutor(1) as pool:
        fields = {"name": "Team folder", "slug": "folder", "transport": "stdio", **forked(FOLDER_SERVER, str(tmp_path))}
        pool.submit(register, **fields).result()
    seen_by_stack()
    base = KnowledgeBase.objects.create(owner=e2e_user, name="Team notes")
    page = kb_page
    page.goto(f"{page.base_url}/knowledge/{base.pk}/")  # type: ignore[attr-defined]
    for name in ("guide.md", "rota.md"):
        page.get_by_test_id("kb-resource-server").select_option("folder")
        page.get_by_test_id("kb-resource-uri").fill(f"docs://{name}")
        page.get_by_test_id("kb-add-resource").click()
    ready = page.locator('[data-testid="kb-doc"][data-status="ready"]')
    expect(ready).to_have_count(2, timeout=60_000)
    expect(page.get_by_test_id("kb-checked")).to_have_count(2)
    expect(page.get_by_test_id("kb-checked").first).to_contain_text("Checked just now")
    expect(page.get_by_test_id("kb-refresh")).to_contain_text("Read again every hour")
    shot(page, "knowledge-mcp-checked", full_page=True)
    found = blocking(axe_violations(page))
    assert not found, describe(found, "knowledge base with MCP documents and their last check")

    guide = Document.objects.get(base=base, reference="mcp:folder:docs://guide.md")
    guide_chunks = list(guide.chunks.values_list("pk", flat=True))
    rota = Document.objects.get(base=base, reference="mcp:folder:docs://rota.md")
    rota_chunks = list(rota.chunks.values_list("pk", flat=True))
    (tmp_path / "guide.md").write_text("# Guide\n\nThe kettle moved to the pantry.\n")
    page.get_by_test_id("kb-refresh-now").click()
    expect(page.get_by_role("status")).to_contain_text("Checking 2 MCP resources again.")
    expect(ready).to_have_count(2, timeout=60_000)
    assert list(rota.chunks.values_list("pk", flat=True)) == rota_chunks  # unchanged: left as it was
    assert list(guide.chunks.values_list("pk", flat=True)) != guide_chunks
    page.get_by_role("link", name="Team folder: docs://guide.md").click()
    expect(page.locator("main")).to_contain_text("moved to the pantry")
    page.go_back()

    (tmp_path / "rota.md").unlink()
    page.get_by_test_id("kb-refresh-now").click()
    failed = page.locator('[data-testid="kb-doc"][data-status="failed"]')
    expect(failed).to_have_count(1, timeout=60_000)
    expect(failed).to_contain_text("The resource is gone")
    expect(failed.get_by_test_id("kb-checked")).to_contain_text("Checked")
    shot(page, "knowledge-mcp-refreshed", full_page=True)
    found = blocking(axe_violations(page))
    assert not found, describe(found, "knowledge base after a refresh found a resource gone")
