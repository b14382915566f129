"""Custom LiteLLM providers registered at their first use (agent/providers.py): once per
process, only for a model of a declared provider, and never at a web process's start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent import providers

ROOT = Path(__file__).resolve().parents[2]
calls: list[str] = []


def register_fake() -> None:
    calls.append("registered")


@pytest.fixture
def fake() -> object:
    calls.clear()
    providers.declare("fakeprov", f"{__name__}:register_fake")
    yield
    providers._declared.pop("fakeprov", None)
    providers._ready.discard("fakeprov")


def test_a_declared_provider_is_registered_once_at_its_first_model(fake: object) -> None:
    providers.ensure("openai/gpt-4o")
    providers.ensure("plain-model-name")
    assert calls == []

    providers.ensure("fakeprov/chat")
    providers.ensure("fakeprov/embed")
    assert calls == ["registered"]


def test_the_demo_model_is_declared_by_the_wiring_and_loaded_only_when_used() -> None:
    # A fresh process, as the web process starts: the ASGI application built, nothing of the
    # demo model (or of LiteLLM) imported until a `demo/...` model is used.
    script = (
        "import sys, config.asgi\n"
        "from agent import providers\n"
        "assert providers._declared['demo'] == 'demo:register', providers._declared\n"
        "assert 'demo' not in sys.modules and 'litellm' not in sys.modules\n"
        "providers.ensure('demo/embed')\n"
        "import litellm\n"
        "assert any(p['provider'] == 'demo' for p in litellm.custom_provider_map)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
