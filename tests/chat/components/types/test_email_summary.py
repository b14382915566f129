from __future__ import annotations

from chat.components import render

from ..helpers import block


def test_email_summary_marks_unread_messages() -> None:
    emails = [
        {"from": "Ana", "subject": "Roadmap", "snippet": "Draft…", "date": "2026-02-14T09:12", "unread": True},
        {"from": "Stripe", "subject": "Invoice", "date": "2026-02-13"},
    ]

    html = render(block("email_summary", emails))

    assert html.count("gu-email is-unread") == 1
    assert "Unread, from </span>Ana" in html
    assert "1 unread" in html
    assert "14 Feb 2026, 09:12" in html
