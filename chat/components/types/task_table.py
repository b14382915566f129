"""task_table: several tasks as a table, with a count per status in its caption."""

from __future__ import annotations

from typing import Any

from ..base import Component, array_of, object_of
from ..tasks import STATUSES, TASK_FIELDS, task

SCHEMA = array_of(object_of(["name"], **TASK_FIELDS), 100)


def prepare(items: list[dict[str, Any]]) -> dict[str, Any]:
    tasks = [task(item) for item in items]
    keys = [t["status"]["key"] for t in tasks if t["status"]]
    summary = [{"label": label, "count": keys.count(key.lower())} for key, label in STATUSES.items()]
    return {"tasks": tasks, "summary": [s for s in summary if s["count"]]}


component = Component(
    name="task_table",
    description="Several tasks as a table: status, priority, due date and assignee.",
    schema=SCHEMA,
    template="components/task_table.html",
    label="task table",
    example=[
        {
            "name": "Fix login bug",
            "status": "IN_PROGRESS",
            "priority": "HIGH",
            "dueDate": "2026-02-15",
            "assignee": "John",
        },
        {
            "name": "Write release notes",
            "status": "TODO",
            "priority": "MEDIUM",
            "dueDate": "2026-02-18",
            "assignee": "Ana",
        },
    ],
    prepare=prepare,
)
