"""Tool names as the model sees them: `toolset__mcp_<slug>__<key>`.

Providers accept `[A-Za-z0-9_-]{1,64}` as a function name, and Tessera splits names on `__`.
A server's own name is kept when it already fits; any other (too long, other characters, a
double underscore) becomes a readable stem plus a hash of the original name, so the key is
stable across refreshes and two names never map to one key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from toolsets.base import qualified_name

MAX_FUNCTION_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_CLEAN = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
HASH_LENGTH = 8


def key_budget(toolset_id: str) -> int:
    return MAX_FUNCTION_NAME - len(qualified_name(toolset_id, ""))


def tool_keys(toolset_id: str, names: Iterable[str]) -> dict[str, str]:
    """Original tool name → key, unique within the toolset and within the length budget."""
    budget = key_budget(toolset_id)
    keys: dict[str, str] = {}
    taken: set[str] = set()
    ordered = sorted(set(names))
    # Names that already fit claim themselves first, so adding a tool never renames another.
    for name in ordered:
        if _CLEAN.match(name) and len(name) <= budget:
            keys[name] = name
            taken.add(name)
    for name in ordered:
        if name in keys:
            continue
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        stem = re.sub(r"_{2,}", "_", _UNSAFE.sub("_", name)).strip("_-") or "tool"
        stem = stem[: budget - HASH_LENGTH - 1].rstrip("_")
        for extra in range(0, len(digest) - HASH_LENGTH):
            key = f"{stem}-{digest[extra : extra + HASH_LENGTH]}" if stem else digest[extra : extra + HASH_LENGTH]
            if key not in taken:
                break
        keys[name] = key
        taken.add(key)
    return keys
