from __future__ import annotations

from chat.components import render
from chat.components.types.meeting_summary import component

from ..helpers import block


def test_meeting_summary_lists_action_items_as_a_checklist() -> None:
    html = render(block("meeting_summary", component.example))

    assert "Sprint planning" in html
    assert "0 of 1 done" in html
    assert '<span class="sr-only">To do: </span><span class="gu-check-body">' in html
    assert "Release on 27 February" in html
