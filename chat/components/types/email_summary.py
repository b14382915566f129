"""email_summary: a list of emails, unread ones marked and counted."""

from __future__ import annotations

from typing import Any

from ..base import BOOLEAN, DATETIME, URL, Component, array_of, initial, object_of, text_field, when

SCHEMA = array_of(
    object_of(
        ["from", "subject"],
        # `from` is a keyword, hence the dict.
        **{"from": text_field(200, "sender name or address")},
        subject=text_field(300),
        snippet=text_field(600, "the first words or a one-line summary"),
        date=DATETIME,
        unread=BOOLEAN,
        url=URL,
    ),
    100,
)


def prepare(items: list[dict[str, Any]]) -> dict[str, Any]:
    emails = [
        {
            "sender": item["from"],
            "initial": initial(item["from"]),
            "subject": item["subject"],
            "snippet": item.get("snippet", ""),
            "date": when(item.get("date")),
            "unread": bool(item.get("unread")),
            "url": item.get("url"),
        }
        for item in items
    ]
    return {"emails": emails, "unread": sum(1 for e in emails if e["unread"])}


component = Component(
    name="email_summary",
    description="A list of emails: sender, subject, a snippet, date and whether it is unread.",
    schema=SCHEMA,
    template="components/email_summary.html",
    label="email summary",
    example=[
        {
            "from": "Ana Lima",
            "subject": "Q1 roadmap",
            "snippet": "Here is the draft we discussed…",
            "date": "2026-02-14T09:12",
            "unread": True,
        }
    ],
    prepare=prepare,
)
