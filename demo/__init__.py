"""Tessera's offline demo model, served through LiteLLM as ``demo/<name>``.

Call ``register()`` once at start-up; afterwards ``litellm.completion`` and
``litellm.acompletion`` accept ``model="demo/tessera"`` with or without streaming.
"""

from __future__ import annotations

import os
import threading

# LiteLLM fetches its cost map over the network at import time unless told not to,
# which stalls for seconds offline. Respect an explicit setting from the environment.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from litellm.utils import custom_llm_setup

from .provider import DEFAULT_TOKENS_PER_SECOND, TOKENS_PER_SECOND_ENV, DemoLLM

PROVIDER = "demo"
MODEL = f"{PROVIDER}/tessera"

__all__ = [
    "DEFAULT_TOKENS_PER_SECOND",
    "MODEL",
    "PROVIDER",
    "TOKENS_PER_SECOND_ENV",
    "DemoLLM",
    "register",
]

_lock = threading.Lock()


def register() -> None:
    """Make ``demo/...`` models callable through LiteLLM; safe to call any number of times."""
    with _lock:
        current = list(litellm.custom_provider_map)
        if any(item["provider"] == PROVIDER and isinstance(item["custom_handler"], DemoLLM) for item in current):
            return
        # Rebinding (rather than appending) leaves no half-updated list visible to a
        # concurrent call; other custom providers are kept.
        litellm.custom_provider_map = [item for item in current if item["provider"] != PROVIDER] + [
            {"provider": PROVIDER, "custom_handler": DemoLLM()}
        ]
        # completion() runs this on every call anyway; running it now also makes
        # litellm.get_llm_provider("demo/...") work before the first completion.
        custom_llm_setup()
