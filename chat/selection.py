"""Which tools a chat may use: `{toolset_id: [tool names]}`, and the popover that edits it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolsets import availability
from toolsets.registry import all_toolsets

Selection = dict[str, list[str]]


def clean(selection: Any) -> Selection:
    """Only registered toolsets and tools, in registry order; anything else is dropped."""
    if not isinstance(selection, dict):
        return {}
    result: Selection = {}
    for toolset in all_toolsets().values():
        chosen = selection.get(toolset.id)
        if not isinstance(chosen, list):
            continue
        names = [tool.name for tool in toolset.tools if tool.name in chosen]
        if names:
            result[toolset.id] = names
    return result


def default_selection() -> Selection:
    """A brand-new user's first chat: every tool of the toolsets that need no key."""
    return {ts.id: [t.name for t in ts.tools] for ts in all_toolsets().values() if not ts.needs_api_key}


def from_form(posted: list[str], previous: Selection, usable: set[str]) -> Selection:
    """The popover posts `toolset:tool` for each ticked box. Unusable toolsets show disabled
    boxes, which browsers do not submit, so their previous selection is kept as it was."""
    picked: dict[str, list[str]] = {}
    for item in posted:
        toolset_id, _, tool = item.partition(":")
        if toolset_id in usable:
            picked.setdefault(toolset_id, []).append(tool)
    for toolset_id, tools in previous.items():
        if toolset_id not in usable:
            picked[toolset_id] = list(tools)
    return clean(picked)


@dataclass
class ToolRow:
    name: str
    display_name: str
    description: str
    checked: bool


@dataclass
class ToolsetRow:
    id: str
    name: str
    description: str
    usable: bool
    reason: str
    settings_url: str
    tools: list[ToolRow]

    @property
    def enabled_count(self) -> int:
        return sum(tool.checked for tool in self.tools)

    @property
    def state(self) -> str:
        """all | none | some — the tri-state of the toolset's checkbox."""
        count = self.enabled_count
        return "all" if count == len(self.tools) else "none" if count == 0 else "some"


def popover_rows(user_id: int, selection: Selection) -> list[ToolsetRow]:
    rows = []
    for toolset_id, state in availability.for_user(user_id).items():
        chosen = set(selection.get(toolset_id, []))
        toolset = state.toolset
        rows.append(
            ToolsetRow(
                id=toolset_id,
                name=toolset.name,
                description=toolset.description,
                usable=state.usable,
                reason=state.reason,
                settings_url=state.settings_url,
                tools=[ToolRow(t.name, t.display_name, t.description, t.name in chosen) for t in toolset.tools],
            )
        )
    return rows


def badge_count(rows: list[ToolsetRow]) -> int:
    """Tools the model will actually be offered: ticked, in usable toolsets."""
    return sum(row.enabled_count for row in rows if row.usable)
