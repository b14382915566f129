"""Knowledge bases in the browser: create a base, upload a Markdown file and a PDF, watch them
index through the real files worker, ask the demo model, and see the cited passage, live and
after a reload; axe on the new pages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.toolsets.files import samples

from .axe import axe_violations, blocking, describe
from .conftest import browser_page, send_and_wait, shot, wait_socket

# Starting the stack (Daphne, a worker) on a busy machine, then indexing in it: more than the default.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

HANDBOOK = """# Team handbook

## Network

The proxy setting is explained under Preferences, Network, Proxy. Ask IT for the address.

## Leave

Parental leave is sixteen weeks.
"""


@pytest.fixture
def kb_page(browser: Browser, stack: Any, e2e_user: Any) -> Iterator[Page]:
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        yield page


def _no_blocking(page: Page, where: str) -> None:
    found = blocking(axe_violations(page))
    assert not found, describe(found, where)


def test_create_upload_index_ask_and_follow_the_citation(kb_page: Page, tmp_path: Path) -> None:
    page = kb_page
    page.goto(f"{page.base_url}/")  # type: ignore[attr-defined]
    page.click('[data-testid="knowledge-link"]')
    expect(page.locator("h1")).to_have_text("Knowledge")
    _no_blocking(page, "knowledge index")

    page.fill('[data-testid="kb-name"]', "Handbook")
    page.click('[data-testid="kb-create"]')
    expect(page.locator("h1")).to_have_text("Handbook")

    markdown = tmp_path / "handbook.md"
    markdown.write_text(HANDBOOK)
    pdf = tmp_path / "security.pdf"
    pdf.write_bytes(samples.pdf(["Security policy", "Badges are renewed every year at the front desk."]))
    page.set_input_files('[data-testid="kb-files"]', [str(markdown), str(pdf)])
    page.click('[data-testid="kb-upload"]')

    documents = page.locator('[data-testid="kb-documents"]')
    expect(documents).to_have_attribute("data-working", "false", timeout=60_000)
    expect(page.locator('[data-testid="kb-doc"][data-status="ready"]')).to_have_count(2)
    expect(page.locator('[data-testid="kb-total-progress"]')).to_have_attribute("value", "100")
    shot(page, "knowledge-base", full_page=True)
    _no_blocking(page, "knowledge base")

    from django.contrib.auth import get_user_model

    from chat.models import Chat
    from knowledge.models import ChatBase, KnowledgeBase

    user = get_user_model().objects.get(username="ada")
    chat = Chat.objects.create(owner=user, enabled_tools={"knowledge": ["search_knowledge", "read_knowledge"]})
    other = KnowledgeBase.objects.create(owner=user, name="Archive")
    handbook = KnowledgeBase.objects.get(owner=user, name="Handbook")
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    page.get_by_test_id("toolsets-popover-trigger").click()
    expect(page.get_by_test_id("kb-attach")).to_be_visible()
    _no_blocking(page, "tools popover with knowledge bases")
    with page.expect_response(lambda r: r.url.endswith(f"/chats/{chat.pk}/tools/") and r.ok):
        page.get_by_test_id(f"kb-attach-{handbook.pk}").check()
    shot(page, "knowledge-popover")
    page.keyboard.press("Escape")
    assert list(ChatBase.objects.filter(chat=chat).values_list("base_id", flat=True)) == [handbook.pk]
    assert other.pk != handbook.pk
    send_and_wait(page, "Search the knowledge base for the proxy setting")

    answer = page.locator(".turn").last
    expect(answer).to_contain_text("Here is what the knowledge base says about “the proxy setting”")
    expect(answer).to_contain_text("Team handbook › Network")
    # No embedding model is configured: the card says the search was by keyword.
    expect(answer.get_by_test_id("tool-call-summary").first).to_contain_text("· keyword")
    expect(answer.locator("sup.cite a").first).to_be_visible()
    source = answer.locator('[data-testid="source"]').first
    expect(source).to_contain_text("handbook.md › Team handbook › Network")
    shot(page, "knowledge-answer")

    page.reload()
    wait_socket(page)
    answer = page.locator(".turn").last
    expect(answer.locator("sup.cite a").first).to_be_visible()
    href = answer.locator('[data-testid="source"] a.source-title').first.get_attribute("href") or ""
    assert href.startswith("/knowledge/documents/") and "#passage-" in href

    page.goto(f"{page.base_url}{href}")  # type: ignore[attr-defined]
    marked = page.locator('[data-testid="kb-marked"]')
    expect(marked).to_contain_text("The proxy setting is explained")
    shot(page, "knowledge-passage")
    _no_blocking(page, "knowledge document")


FILES_GUIDE = """# Files

## Deleting

To remove a file, open its menu and choose Delete. It goes to the bin for thirty days.

## Sharing

Share a folder with your team from its menu.
"""


def test_with_an_embedding_model_search_is_hybrid_and_the_card_says_so(kb_page: Page, tmp_path: Path) -> None:
    from django.contrib.auth import get_user_model

    from chat.models import Chat
    from knowledge.models import ChunkVector, KnowledgeBase, RetrievalSettings

    settings_row = RetrievalSettings.load()
    settings_row.embedding_model = "demo/embed"  # an admin chose the demo embedding model
    settings_row.save()
    user = get_user_model().objects.get(username="ada")
    base = KnowledgeBase.objects.create(owner=user, name="Guides")
    page = kb_page
    page.goto(f"{page.base_url}/knowledge/{base.pk}/")  # type: ignore[attr-defined]
    guide = tmp_path / "files.md"
    guide.write_text(FILES_GUIDE)
    page.set_input_files('[data-testid="kb-files"]', [str(guide)])
    page.click('[data-testid="kb-upload"]')
    expect(page.locator('[data-testid="kb-doc"][data-status="ready"]')).to_have_count(1, timeout=60_000)
    # The files worker embedded the passages while indexing them.
    assert ChunkVector.objects.filter(base=base).count() == base.documents.get().chunk_count

    chat = Chat.objects.create(owner=user, enabled_tools={"knowledge": ["search_knowledge", "read_knowledge"]})
    page.goto(f"{page.base_url}/chats/{chat.pk}/")  # type: ignore[attr-defined]
    wait_socket(page)
    # "erase" and "wipe" are in no document: only the meaning finds the passage about deleting.
    send_and_wait(page, "Search the knowledge base for erase wipe")

    answer = page.locator(".turn").last
    expect(answer.get_by_test_id("tool-call-summary").first).to_contain_text("· hybrid")
    expect(answer).to_contain_text("Files › Deleting")
    shot(page, "knowledge-hybrid")
    page.reload()
    wait_socket(page)
    expect(page.locator(".turn").last.get_by_test_id("tool-call-summary").first).to_contain_text("· hybrid")
