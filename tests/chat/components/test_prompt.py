"""The system prompt's documentation of the cards (chat/components/prompt.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from chat import components
from chat.components import COMPONENTS
from chat.worker.prompts import system_prompt


def test_the_system_prompt_documents_every_component_with_its_example() -> None:
    prompt = system_prompt(datetime(2026, 2, 14, tzinfo=UTC))

    assert "Saturday, 14 February 2026" in prompt
    assert "Do not announce or narrate tool calls" in prompt
    assert "Speak once you have the data" in prompt
    for name, component in COMPONENTS.items():
        assert f"### {name}\n{component.description}" in prompt
        assert f':::component{{type="{name}"}}\n{json.dumps(component.example, ensure_ascii=False)}\n:::' in prompt
        for field in component.schema.get("properties") or component.schema["items"]["properties"]:
            assert f'"{field}"' in prompt


def test_the_documented_enums_are_the_accepted_ones() -> None:
    prompt = components.prompt_documentation()

    assert 'one of "TODO", "IN_PROGRESS", "BLOCKED", "DONE", "CANCELLED"' in prompt
    assert 'one of "linkedin", "x", "mastodon", "bluesky"' in prompt
