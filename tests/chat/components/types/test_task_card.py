from __future__ import annotations

from chat.components import render
from chat.components.types.task_card import component

from ..helpers import block


def test_task_card_has_a_display_only_checklist_and_a_safe_link() -> None:
    html = render(block("task_card", component.example))

    assert "1 of 2 done" in html
    assert '<span class="sr-only">Done: </span><span class="gu-check-text">Reproduce</span>' in html
    assert '<span class="sr-only">To do: </span><span class="gu-check-text">Patch the callback</span>' in html
    assert "<input" not in html  # nothing to click: the checklist is display-only
    assert 'href="https://tracker.example.com/WEB-142" target="_blank" rel="noopener noreferrer"' in html
