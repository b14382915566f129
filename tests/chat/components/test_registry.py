"""The lazy component registry (chat/components/registry.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.template.loader import get_template

from chat import components
from chat.components import COMPONENTS, parse, render
from chat.components import types as component_types
from chat.components.registry import COMPONENT_MODULES, all_components, load

from .helpers import block


def test_the_registry_loads_every_listed_module_in_order() -> None:
    listed = [importlib.import_module(path).component for path in COMPONENT_MODULES]

    assert list(all_components()) == [c.name for c in listed]
    assert [id(c) for c in all_components().values()] == [id(c) for c in listed]
    assert components.COMPONENTS is all_components()  # the one dict a test may patch


def test_every_type_module_is_listed() -> None:
    modules = {path.stem for path in Path(component_types.__file__).parent.glob("*.py")} - {"__init__"}

    assert {f"chat.components.types.{name}" for name in modules} <= set(COMPONENT_MODULES)


@pytest.mark.parametrize("path", COMPONENT_MODULES)
def test_each_listed_type_is_named_after_its_module_and_its_example_validates_and_renders(path: str) -> None:
    component = importlib.import_module(path).component
    source = block(component.name, component.example)

    assert path.rsplit(".", 1)[1] == component.name
    get_template(component.template)
    # The example is what the model is shown: it must pass as written, with nothing to clean up.
    assert parse(source).data == component.example
    assert render(source).startswith(f'<div class="gen-ui gen-ui-{component.name}" data-component="{component.name}">')


@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_every_example_is_valid_and_renders_its_card(name: str) -> None:
    component = COMPONENTS[name]

    assert parse(block(name, component.example)).error == ""
    html = render(block(name, component.example))
    assert html.startswith(f'<div class="gen-ui gen-ui-{name}" data-component="{name}">')
    assert html.endswith("</div>")


def test_a_module_without_a_component_is_refused() -> None:
    with pytest.raises(TypeError, match="has no module-level `component`"):
        load(["chat.components.tasks"])


def test_a_type_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="Duplicate component type 'task_card'"):
        load(["chat.components.types.task_card", "chat.components.types.task_card"])
