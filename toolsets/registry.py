"""The lazy toolset registry.

Settings list toolsets by dotted module path; a module is imported the first time anything asks
for toolsets, and must expose a module-level `toolset`. Adding a toolset is adding a folder and
one line in `TOOLSET_MODULES`.

Toolsets an admin configures at run time (MCP servers) come from `DYNAMIC_SOURCES`: each is a
dotted path to a function returning `{id: Toolset}`, which keeps its own cache.
"""

from __future__ import annotations

import importlib
from functools import cache

from core import plugins

from .base import Tool, Toolset, split_qualified_name

TOOLSET_MODULES: list[str] = [
    "toolsets.clock_math",
    "toolsets.exa",
    "toolsets.web",
    "toolsets.workspace.tools",
    "toolsets.files.tools",
    "toolsets.code.tools",
    # Plug-ins from the floors above (knowledge/, artifacts/, memory/): listed by path, never
    # imported here.
    "knowledge.tools",
    "artifacts.tools",
    "memory.tools",
]

DYNAMIC_SOURCES: list[str] = [
    "toolsets.mcp.catalog.toolsets",
]


def all_toolsets() -> dict[str, Toolset]:
    found = dict(builtin_toolsets())
    for path in DYNAMIC_SOURCES:
        module, _, name = path.rpartition(".")
        for toolset_id, toolset in getattr(importlib.import_module(module), name)().items():
            # A built-in id always wins: a configured toolset cannot shadow one.
            found.setdefault(toolset_id, toolset)
    return found


@cache
def builtin_toolsets() -> dict[str, Toolset]:
    return plugins.load(TOOLSET_MODULES, "toolset", Toolset, lambda t: t.id, "toolset id")


def get_toolset(toolset_id: str) -> Toolset | None:
    return all_toolsets().get(toolset_id)


def resolve(qualified: str) -> tuple[Toolset, Tool] | None:
    """`toolset__{toolset_id}__{tool}` → (toolset, tool), or None when nothing has that name."""
    parts = split_qualified_name(qualified)
    if parts is None:
        return None
    toolset = get_toolset(parts[0])
    if toolset is None:
        return None
    found = toolset.get(parts[1])
    return (toolset, found) if found else None
