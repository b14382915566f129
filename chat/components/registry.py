"""The lazy component registry.

Types are listed by dotted module path; the modules are imported the first time anything asks
for a component, and each must expose a module-level `component`. Adding a type is adding a
module under `types/`, its partial under templates/components/, and one line here. The order is
the order the system prompt documents them in.
"""

from __future__ import annotations

from functools import cache

from core import plugins

from .base import Component

COMPONENT_MODULES: list[str] = [
    "chat.components.types.task_table",
    "chat.components.types.task_card",
    "chat.components.types.calendar_events",
    "chat.components.types.email_summary",
    "chat.components.types.meeting_summary",
    "chat.components.types.social_post",
]


def load(paths: list[str]) -> dict[str, Component]:
    """The components of these modules by type name, in the order given."""
    return plugins.load(paths, "component", Component, lambda c: c.name, "component type")


@cache
def all_components() -> dict[str, Component]:
    # One dict for the life of the process: `COMPONENTS` is this very object.
    return load(COMPONENT_MODULES)
