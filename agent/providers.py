"""LiteLLM custom providers (a `<provider>/<model>` name LiteLLM itself does not know) made
callable the first time a model of theirs is used, in whichever process uses it.

The wiring (config/) declares each one with the dotted path of its `register` function; the
seam (llm.py, embeddings.py) calls `ensure(model)` before each LiteLLM call. A process that never
uses such a model never imports it, so the web process starts no slower for it, yet a search that
embeds its query there (a `/mcp` or execution-API caller's tool runs in the web process) finds
the model as a worker does. Plain Python: the seam cannot import the wiring above it.
"""

from __future__ import annotations

import importlib
import threading

_declared: dict[str, str] = {}  # provider → "package.module:function"
_ready: set[str] = set()
_lock = threading.Lock()


def declare(provider: str, register: str) -> None:
    """`register` ("module:function") makes `provider/...` models callable; run at first use."""
    _declared[provider] = register


def ensure(model: str) -> None:
    """Registers the custom provider `model` belongs to, once per process, if one is declared."""
    provider = model.split("/", 1)[0] if "/" in model else ""
    if not provider or provider in _ready or provider not in _declared:
        return
    with _lock:
        if provider in _ready:
            return
        module, _, function = _declared[provider].partition(":")
        getattr(importlib.import_module(module), function)()
        _ready.add(provider)
