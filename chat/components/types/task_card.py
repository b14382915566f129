"""task_card: one task in detail, with its description, a display-only subtask checklist and tags."""

from __future__ import annotations

from typing import Any

from ..base import BOOLEAN, URL, Component, array_of, object_of, text_field
from ..tasks import TASK_FIELDS, task

SCHEMA = object_of(
    ["name"],
    **TASK_FIELDS,
    description=text_field(4000),
    project=text_field(120),
    tags=array_of(text_field(40), 12),
    subtasks=array_of(object_of(["title"], title=text_field(300), done=BOOLEAN), 50),
    url=URL,
)


def prepare(item: dict[str, Any]) -> dict[str, Any]:
    subtasks = [{"title": s["title"], "done": bool(s.get("done"))} for s in item.get("subtasks", [])]
    return {
        "task": {
            **task(item),
            "description": item.get("description", ""),
            "project": item.get("project", ""),
            "tags": item.get("tags", []),
            "subtasks": subtasks,
            "subtasks_done": sum(1 for s in subtasks if s["done"]),
            "url": item.get("url"),
        }
    }


component = Component(
    name="task_card",
    description="One task in detail, with its description, subtasks and tags.",
    schema=SCHEMA,
    template="components/task_card.html",
    label="task card",
    example={
        "name": "Fix login bug",
        "status": "IN_PROGRESS",
        "priority": "HIGH",
        "dueDate": "2026-02-15",
        "assignee": "John",
        "project": "Web app",
        "description": "Users with SSO accounts get a 500 after the redirect.",
        "tags": ["auth", "bug"],
        "subtasks": [{"title": "Reproduce", "done": True}, {"title": "Patch the callback", "done": False}],
        "url": "https://tracker.example.com/WEB-142",
    },
    prepare=prepare,
)
