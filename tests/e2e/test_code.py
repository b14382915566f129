"""The Code toolset in the browser, with the demo model and a real sandbox worker: a run's output
streams onto its card while the code runs; "plot this CSV" shows the chart as a picture and
offers the summary it wrote as a download (the owner's only); the next call sees the variables
of the one before. Axe on the card in both themes; screenshots light and dark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from sandbox import jail

from .axe import axe_violations, blocking, describe, set_theme
from .conftest import browser_page, send, shot, wait_socket, wait_turn_done

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(400),
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok"),
]

CSV = "month,spend\nJan,120\nFeb,95\nMar,143\nApr,110\n"
STREAMING = (
    "run this python:\n```python\nimport time\nfor i in range(3):\n    print('tick', i)\n    time.sleep(1.5)\n```"
)


def _chat(user: Any) -> Any:
    from chat.models import Chat
    from toolsets.models import ToolsetConfig

    # Off until an admin switches it on (a migration made it so).
    ToolsetConfig.objects.update_or_create(toolset_id="code", defaults={"enabled": True})
    return Chat.objects.create(owner=user, enabled_tools={"code": ["run_python"]})


def test_code_card_streams_plots_offers_files_and_keeps_state(
    browser: Browser, stack: Any, e2e_user: Any, tmp_path: Path
) -> None:
    chat = _chat(e2e_user)
    with browser_page(browser, stack.url, bypass_csp=True) as page:
        page.goto(f"{stack.url}/chats/{chat.pk}/")
        wait_socket(page)

        send(page, STREAMING)
        card = page.locator('[data-testid="tool-call-message"]').last
        output = card.locator('[data-testid="code-output"]')
        # Live: the first line is on the card while the code still runs.
        expect(output).to_contain_text("tick 0", timeout=30_000)
        assert card.get_attribute("data-status") == "calling"
        assert "tick 2" not in output.inner_text()
        expect(card.locator('[data-testid="code-source"] .hl-kn').first).to_have_text("import")
        wait_turn_done(page, 60_000)
        expect(card).to_have_attribute("data-status", "success")
        expect(output).to_have_text("tick 0\ntick 1\ntick 2\n")

        data = tmp_path / "spend.csv"
        data.write_text(CSV)
        page.set_input_files('[data-testid="attach-input"]', [str(data)])
        expect(page.locator('[data-testid="attach-chip"]', has_text="spend.csv")).to_have_class(
            "file-chip is-ready", timeout=20_000
        )
        send(page, "plot this CSV")
        page.wait_for_function("() => document.querySelectorAll('[data-testid=\"tool-call-message\"]').length >= 2")
        wait_turn_done(page, 90_000)
        card = page.locator('[data-testid="tool-call-message"]').last
        expect(card).to_have_attribute("data-status", "success")
        figure = card.locator('[data-testid="code-figure"]')
        expect(figure).to_have_count(1)
        assert page.evaluate("(img) => img.naturalWidth > 300", figure.element_handle())
        expect(card.locator('[data-testid="code-output"]')).to_contain_text("4 rows, columns: month, spend")
        link = card.locator('[data-testid="code-file"]', has_text="summary.csv")
        expect(link).to_have_count(1)
        download = page.request.get(stack.url + (link.get_attribute("href") or ""))
        assert download.status == 200 and "spend" in download.text() and "mean" in download.text()

        # The next call sees the state the last one left.
        send(page, "run this python:\n```python\nprint(int(df['spend'].sum()))\n```")
        page.wait_for_function("() => document.querySelectorAll('[data-testid=\"tool-call-message\"]').length >= 3")
        wait_turn_done(page, 60_000)
        expect(page.locator('[data-testid="code-output"]').last).to_have_text("468\n")

        plot = page.locator('[data-testid="tool-call-message"]').nth(1)
        plot.locator("summary").click()  # a finished card is folded: opened to be seen
        expect(plot.locator('[data-testid="code-figure"]')).to_be_visible()
        plot.locator('[data-testid="code-figure"]').scroll_into_view_if_needed()
        failures = []
        for theme in ("light", "dark"):
            set_theme(page, theme)
            found = blocking(axe_violations(page, "[data-testid='tool-call-message']"))
            if found:
                failures.append(describe(found, f"code card, {theme}"))
            shot(page, f"code-card-{theme}")
        assert not failures, "\n".join(failures)

        # After a reload the cards are the same: the code, the output, the chart, the file.
        page.reload()
        wait_socket(page)
        plot = page.locator('[data-testid="tool-call-message"]').nth(1)
        plot.locator("summary").click()
        expect(plot.locator('[data-testid="code-figure"]')).to_be_visible()
        expect(plot.locator('[data-testid="code-file"]', has_text="summary.csv")).to_have_count(1)

    # Someone else's download of that file is a missing file.
    from django.contrib.auth import get_user_model

    from .conftest import PASSWORD

    get_user_model().objects.create_user("grace", password=PASSWORD)
    with browser_page(browser, stack.url, signed_in=False) as other:
        from .conftest import login

        login(other, stack.url, "grace")
        assert other.request.get(download.url).status == 404
