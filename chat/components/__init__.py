"""Generative UI: cards the model writes into its answer as component blocks.

    :::component{type="task_table"}
    [{"name": "Fix login bug", "status": "IN_PROGRESS", "priority": "HIGH"}]
    :::

Each type (one module under `types/`, listed in `registry.COMPONENT_MODULES`) has a JSON schema,
a partial under templates/components/, the label shown while its block is still streaming, and
an example. The system prompt's documentation is generated from the registry
(`prompt_documentation`), so what the model is told and what the code accepts cannot drift apart.

Model data is untrusted: it is validated against the schema, URL fields keep only http(s) links
(`parser`), and the partials render it with autoescape, then nh3 cleans the result against the
partials' own allow-list (`renderer`). A block that cannot be shown (bad JSON, wrong shape,
unknown type) renders as its escaped text with a short notice, never as an error for the whole
message. Rendering is a pure function of the block's text, so the live stream and a reload
produce the same HTML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Component
from .parser import Parsed, parse, safe_url
from .prompt import prompt_documentation
from .registry import all_components
from .renderer import keep_attribute, render, render_placeholder
from .syntax import CLOSER, opener_type, pending_type

__all__ = [
    "CLOSER",
    "COMPONENTS",
    "Component",
    "Parsed",
    "all_components",
    "keep_attribute",
    "opener_type",
    "parse",
    "pending_type",
    "prompt_documentation",
    "render",
    "render_placeholder",
    "safe_url",
]

# Every component by type name. The registry imports the types on first use, so the name is
# resolved then (below), not bound at import; it is always the registry's one dict.
COMPONENTS: dict[str, Component]

if not TYPE_CHECKING:  # hidden from mypy, which would otherwise accept any attribute of the package

    def __getattr__(name: str) -> Any:
        if name == "COMPONENTS":
            return all_components()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
