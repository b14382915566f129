"""Registering the demo provider with LiteLLM (demo/__init__.py)."""

from __future__ import annotations

import litellm

import demo

from .helpers import MODEL


def test_register_is_idempotent() -> None:
    demo.register()
    demo.register()
    assert [item["provider"] for item in litellm.custom_provider_map].count("demo") == 1
    assert litellm.get_llm_provider(MODEL)[1] == "demo"
