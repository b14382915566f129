"""Blocks, sample data and HTML checks shared by the component tests."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

from chat.rendering import render_text


def block(kind: str, data: Any, *, indent: int | None = None) -> str:
    return f':::component{{type="{kind}"}}\n{json.dumps(data, indent=indent, ensure_ascii=False)}\n:::'


def full(text: str) -> str:
    return "".join(render_text(text, complete=True).blocks)


TASKS = [
    {"name": "Fix login bug", "status": "IN_PROGRESS", "priority": "HIGH", "dueDate": "2026-02-15", "assignee": "John"},
    {"name": "Write release notes", "status": "TODO", "priority": "MEDIUM", "dueDate": "2026-02-18", "assignee": "Ana"},
    {"name": "Migrate billing", "status": "BLOCKED", "priority": "URGENT"},
    {"name": "Update onboarding emails", "status": "DONE", "priority": "LOW", "assignee": "Sam"},
]
TABLE = block("task_table", TASKS, indent=2)


class Elements(HTMLParser):
    """Every start tag with its attributes, to check what the browser would build."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def notice(html: str) -> str:
    assert html.startswith('<div class="gen-ui gen-ui-invalid"'), html
    return html
