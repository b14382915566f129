"""Loading plug-ins listed by dotted module path (toolsets, agents, component types): each module
exposes one object under a known name; the result maps each object's id to it, in list order."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def load[T](paths: list[str], attribute: str, kind: type[T], key: Callable[[T], str], what: str) -> dict[str, T]:
    """Imports each module; a module without a `kind` under `attribute`, or two with the same
    key, is a programming error raised at once (TypeError, ValueError)."""
    found: dict[str, T] = {}
    for path in paths:
        item = getattr(importlib.import_module(path), attribute, None)
        if not isinstance(item, kind):
            raise TypeError(f"{path} has no module-level `{attribute}` that is a {kind.__name__}")
        if key(item) in found:
            raise ValueError(f"Duplicate {what} {key(item)!r}")
        found[key(item)] = item
    return found
