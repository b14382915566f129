"""What task_table and task_card share: the task fields, their labels and their view model."""

from __future__ import annotations

from typing import Any

from .base import DATE, choice, enum_field, initial, text_field, when

STATUSES = {
    "TODO": "To do",
    "IN_PROGRESS": "In progress",
    "BLOCKED": "Blocked",
    "DONE": "Done",
    "CANCELLED": "Cancelled",
}
PRIORITIES = {"URGENT": "Urgent", "HIGH": "High", "MEDIUM": "Medium", "LOW": "Low"}

TASK_FIELDS: dict[str, dict[str, Any]] = {
    "name": text_field(300, "what the task is"),
    "status": enum_field(STATUSES),
    "priority": enum_field(PRIORITIES),
    "dueDate": DATE,
    "assignee": text_field(120, "who does it"),
}


def task(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": item["name"],
        "status": choice(item.get("status"), STATUSES),
        "priority": choice(item.get("priority"), PRIORITIES),
        "due": when(item.get("dueDate")),
        "assignee": item.get("assignee", ""),
        "assignee_initial": initial(item.get("assignee", "")),
    }
