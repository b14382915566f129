"""Plug-ins listed by dotted path: loaded in order, and a wrong or repeated one is refused."""

from __future__ import annotations

import pytest

from chat.agents.base import AgentSpec
from core import plugins


def test_loads_in_order_keyed_by_id() -> None:
    found = plugins.load(
        ["chat.agents.general", "chat.agents.researcher"], "agent", AgentSpec, lambda a: a.id, "agent id"
    )
    assert list(found) == ["general", "researcher"]


def test_a_module_without_the_object_or_a_repeated_id_is_refused() -> None:
    with pytest.raises(TypeError, match="has no module-level `agent` that is a AgentSpec"):
        plugins.load(["chat.agents.base"], "agent", AgentSpec, lambda a: a.id, "agent id")
    with pytest.raises(ValueError, match="Duplicate agent id 'general'"):
        plugins.load(["chat.agents.general"] * 2, "agent", AgentSpec, lambda a: a.id, "agent id")
