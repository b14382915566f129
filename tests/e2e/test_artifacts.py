"""Artifacts in the browser, with the demo model and a real worker: "make an HTML page" opens the
page in the panel beside the chat, drawn in the sandbox on the other origin; the user edits it
(a version of their own), the assistant revises it, versions switch; live and after a reload. A
Mermaid diagram is drawn inside its frame from the bundled library. A hostile artifact gets none
of Tessera's cookies, storage or APIs. A shared chat shows the artifact display-only. Axe on the
panel in both themes; screenshots."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, FrameLocator, Page, expect

from toolsets.mcp import app_sandbox

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import browser_page, send, shot, wait_socket, wait_turn_done

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400), pytest.mark.django_db(transaction=True)]

TOOLS = {"artifacts": ["create_artifact", "update_artifact", "read_artifact"]}
HOSTILE = """<!doctype html><html><body><pre id="out">running</pre><script>
(async () => {
  const seen = [];
  const attempt = async (name, fn) => {
    try { const got = await fn(); seen.push(name + ":" + (got ? "GOT " + String(got).slice(0, 80) : "empty")); }
    catch (e) { seen.push(name + ":blocked"); }
  };
  await attempt("cookie", () => document.cookie);
  await attempt("storage", () => localStorage.getItem("tessera-theme") || "storage-open");
  await attempt("parent", () => window.parent.document.cookie || window.parent.document.title);
  await attempt("top", () => window.top.location.href);
  await attempt("api", async () => {
    const r = await fetch("__ORIGIN__/chats/", {credentials: "include"});
    return r.status + (await r.text()).slice(0, 40);
  });
  document.getElementById("out").textContent = seen.join("\\n");
})();
</script></body></html>"""


def _chat(user: Any) -> Any:
    from chat.models import Chat

    return Chat.objects.create(owner=user, enabled_tools=TOOLS)


def _document(page: Page) -> FrameLocator:
    # The panel's frame is the sandbox proxy (the other origin); the artifact is its inner frame.
    return page.frame_locator('[data-testid="artifact-frame"]').frame_locator("iframe")


def _shown(page: Page, version: str) -> FrameLocator:
    """The document once the panel shows `version`: the panel is replaced first, then its frame."""
    expect(page.locator("[data-artifact-view]")).to_have_attribute("data-version", version, timeout=20_000)
    expect(page.locator('[data-artifact-view] [data-testid="artifact-frame"]')).to_have_count(1, timeout=20_000)
    return _document(page)


def _open(page: Page, artifact_id: int) -> None:
    page.evaluate(
        """(id) => { const b = document.createElement("button"); b.dataset.artifactOpen = id;
                     document.body.appendChild(b); b.click(); b.remove(); }""",
        artifact_id,
    )


def test_html_artifact_opens_is_edited_and_versions_switch_live_and_after_reload(
    browser: Browser, stack: Any, e2e_user: Any
) -> None:
    chat = _chat(e2e_user)
    with browser_page(browser, stack.url) as page:
        page.goto(f"{stack.url}/chats/{chat.pk}/")
        wait_socket(page)
        send(page, "make an HTML page about our spring launch")
        wait_turn_done(page, 60_000)
        card = page.locator('[data-testid="artifact-card"]').last
        expect(card.locator('[data-testid="artifact-card-title"]')).to_have_text("Our spring launch")
        panel = page.locator('[data-testid="artifact-panel"]')
        # Live: the new artifact opens beside the chat, drawn on the sandbox origin.
        expect(panel).to_be_visible()
        expect(_document(page).locator("h1")).to_have_text("Our spring launch", timeout=20_000)
        src = page.locator('[data-testid="artifact-frame"]').get_attribute("src") or ""
        # An origin of Tessera's own documents: neither the page's nor any MCP server's.
        assert src.startswith(stack.url.replace("127.0.0.1", f"{app_sandbox.label('')}.localhost") + "/app-sandbox/")
        # Its own script runs, in the sandbox.
        _document(page).locator("#count").click()
        expect(_document(page).locator("#count")).to_have_text("Clicked 1 time")

        # The user's edit is a new version of their own.
        panel.locator('[data-testid="artifact-edit"]').click()
        source = panel.locator('[data-testid="artifact-source"]')
        expect(source).to_be_focused()
        draft = source.input_value() or ""
        assert "written by Tessera's demo model" in draft
        source.fill(
            re.sub(r"<header><h1>(.*?)</h1><p>[^<]*</p>", r'<header><h1>\1</h1><p id="note">Reviewed by Ada</p>', draft)
        )
        panel.locator('[data-testid="artifact-save"]').click()
        expect(_shown(page, "2").locator("#note")).to_have_text("Reviewed by Ada", timeout=20_000)
        versions = panel.locator('[data-testid="artifact-versions"] option')
        expect(versions).to_have_count(2)
        expect(versions.first).to_contain_text("Version 2 · You")

        # Versions switch.
        panel.locator('[data-testid="artifact-versions"]').select_option("1")
        expect(_shown(page, "1").locator("header p")).to_contain_text("demo model", timeout=20_000)
        expect(_document(page).locator("#note")).to_have_count(0)
        panel.locator('[data-testid="artifact-versions"]').select_option("2")
        expect(_shown(page, "2").locator("#note")).to_have_text("Reviewed by Ada", timeout=20_000)

        # The assistant revises the latest version (the user's), live.
        send(page, "change the heading to Launch day")
        page.wait_for_function("() => document.querySelectorAll('[data-testid=\"artifact-card\"]').length >= 2")
        wait_turn_done(page, 60_000)
        card = page.locator('[data-testid="tool-call-message"]').last
        expect(card).to_have_attribute("data-status", "success")
        expect(_shown(page, "3").locator("h1")).to_have_text("Launch day", timeout=20_000)
        # Made from the latest version: the user's edit is kept.
        expect(_document(page).locator("#note")).to_have_text("Reviewed by Ada")
        expect(versions).to_have_count(3)
        expect(versions.first).to_contain_text("Version 3 · Assistant")

        download = page.request.get(
            stack.url + (panel.locator('[data-testid="artifact-download"]').get_attribute("href") or "")
        )
        assert download.status == 200 and "Launch day" in download.text()
        assert "attachment" in download.headers["content-disposition"]

        for theme in ("light", "dark"):
            set_theme(page, theme)
            shot(page, f"artifact-panel-{theme}")

        # After a reload: the cards, and the panel that was open, with its versions.
        page.reload()
        wait_socket(page)
        expect(page.locator('[data-testid="artifact-card"]')).to_have_count(2)
        expect(_document(page).locator("h1")).to_have_text("Launch day", timeout=20_000)
        expect(versions).to_have_count(3)
        panel.locator('[data-testid="artifact-versions"]').select_option("2")
        expect(_shown(page, "2").locator("h1")).to_have_text("Our spring launch", timeout=20_000)
        expect(_document(page).locator("#note")).to_have_text("Reviewed by Ada")
        page.locator('[data-testid="artifact-open"]').first.click()
        expect(_shown(page, "1").locator("h1")).to_have_text("Our spring launch", timeout=20_000)
        expect(page.locator("#artifact-panel-title")).to_be_focused()
        page.locator("[data-artifact-close]").click()
        expect(panel).to_be_hidden()
        # From the keyboard: Escape closes it, and focus goes back to the card's button.
        opener = page.locator('[data-testid="artifact-open"]').last
        opener.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#artifact-panel-title")).to_be_focused()
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        expect(opener).to_be_focused()

    with browser_page(browser, stack.url, bypass_csp=True) as page:
        page.goto(f"{stack.url}/chats/{chat.pk}/")
        wait_socket(page)
        page.locator('[data-testid="artifact-open"]').last.click()
        expect(_document(page).locator("h1")).to_have_text("Launch day", timeout=20_000)
        page.locator('[data-testid="artifact-edit"]').click()
        failures = []
        for theme in ("light", "dark"):
            set_theme(page, theme)
            for where in ("#artifact-panel", "[data-testid='artifact-card']"):
                found = blocking(axe_violations(page, where))
                if found:
                    failures.append(describe(found, f"{where}, {theme}"))
        assert not failures, "\n".join(failures)


def test_mermaid_diagram_is_drawn_in_its_sandbox_and_a_share_shows_it_display_only(
    browser: Browser, stack: Any, e2e_user: Any
) -> None:
    from chat.models import ChatShare, Turn

    chat = _chat(e2e_user)
    with browser_page(browser, stack.url) as page:
        page.goto(f"{stack.url}/chats/{chat.pk}/")
        wait_socket(page)
        send(page, "draw a diagram of the release process")
        wait_turn_done(page, 60_000)
        diagram = _document(page).locator("pre.mermaid svg")
        expect(diagram).to_be_visible(timeout=30_000)
        expect(_document(page).locator("pre.mermaid")).to_contain_text("The release process")
        shot(page, "artifact-mermaid")

    turns = list(Turn.objects.filter(chat=chat).values_list("id", flat=True))
    share = ChatShare.objects.create(chat=chat, token="s" * 32, turn_ids=turns)
    with browser_page(browser, stack.url) as page:
        page.goto(f"{stack.url}/s/{share.token}/")
        page.locator('[data-testid="artifact-open"]').click()
        expect(_document(page).locator("pre.mermaid svg")).to_be_visible(timeout=30_000)
        expect(page.locator('[data-testid="artifact-edit"]')).to_have_count(0)
        expect(page.locator('[data-testid="artifact-download"]')).to_have_attribute(
            "href", re.compile(r"^/s/s+/artifacts/")
        )
        shot(page, "artifact-shared")


def test_an_artifact_gets_no_cookies_storage_or_api_of_tessera(browser: Browser, stack: Any, e2e_user: Any) -> None:
    from artifacts import store

    chat = _chat(e2e_user)
    made = store.create(
        owner_id=e2e_user.pk,
        chat_id=chat.pk,
        title="Probe",
        kind="html",
        content=HOSTILE.replace("__ORIGIN__", stack.url),
    )
    with browser_page(
        browser, stack.url, allow_console=("Connecting to ", "Fetch API cannot load", "Refused to connect")
    ) as page:
        page.goto(f"{stack.url}/chats/{chat.pk}/")
        wait_socket(page)
        page.evaluate("() => localStorage.setItem('tessera-theme', 'light')")
        assert any(c["name"] == "sessionid" for c in page.context.cookies())
        _open(page, made.artifact.pk)
        out = _document(page).locator("#out")
        expect(out).not_to_have_text("running", timeout=20_000)
        report = out.inner_text()
        for probe in ("cookie", "storage", "parent", "top", "api"):
            line = next(line for line in report.splitlines() if line.startswith(probe + ":"))
            assert "GOT" not in line, report
