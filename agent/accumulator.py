"""Joining streamed tool-call deltas into whole calls, whatever shape the provider streams."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .transcript import new_call_id
from .types import ToolCall


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)
    position: int = -1  # among the named calls, once named

    def arguments_complete(self) -> bool:
        try:
            json.loads("".join(self.parts))
        except ValueError:
            return False
        return True


class ToolCallAccumulator:
    """Joins streamed tool-call deltas into whole calls, in the order they were opened.

    Providers differ: OpenAI streams id+name first, then argument pieces by index; Gemini sends
    each call whole; Groq may put pieces of two calls in one chunk; Ollama may put every parallel
    call at index 0, with a new id or with the same one; Anthropic sends "" for a call without
    arguments, others send no arguments at all. The rule that covers them: a fragment carrying a
    name starts a new call when the call at its place already has a name and this fragment has
    another id or another name, or brings arguments after that call's arguments were already
    complete JSON (some servers repeat the name and id on every fragment of one call). A fragment without a
    name always continues a call: the one at its index, else the one with its id, else the last.
    """

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}
        self._named = 0
        # Named calls whose arguments grew in the last `add`, by position.
        self.grown: set[int] = set()

    def add(self, deltas: list[Any]) -> list[tuple[int, str, str]]:
        """Fold in deltas; returns (position, id, name) for each call whose name just became known."""
        opened: list[tuple[int, str, str]] = []
        self.grown = set()
        for delta in deltas:
            index = get_field(delta, "index")
            call_id = get_field(delta, "id")
            call_id = call_id if isinstance(call_id, str) else ""
            function = get_field(delta, "function")
            name = get_field(function, "name") if function is not None else None
            name = name if isinstance(name, str) else ""
            arguments = get_field(function, "arguments") if function is not None else None
            if isinstance(arguments, dict):  # a few servers send the arguments as an object
                arguments = json.dumps(arguments)
            arguments = arguments if isinstance(arguments, str) else ""
            position = self._place(index, call_id, name, arguments)
            slot = self._slots[position]
            if call_id and not slot.id:
                slot.id = call_id
                self._by_id.setdefault(call_id, position)
            if name and not slot.name:
                slot.name = name
                slot.position = self._named
                opened.append((self._named, slot.id, name))
                self._named += 1
            if arguments:
                slot.parts.append(arguments)
                if slot.name:
                    self.grown.add(slot.position)
        return opened

    def arguments_so_far(self, position: int) -> str:
        """The arguments streamed so far of the `position`-th named call (maybe not JSON yet)."""
        slot = next((s for s in self._slots if s.position == position), None)
        return "".join(slot.parts) if slot is not None else ""

    def _place(self, index: Any, call_id: str, name: str, arguments: str) -> int:
        if isinstance(index, int) and not isinstance(index, bool):
            position = self._by_index.get(index)
        elif call_id:
            position = self._by_id.get(call_id)
        elif not name and self._slots:
            position = len(self._slots) - 1
        else:
            position = None
        if position is not None and name:
            slot = self._slots[position]
            other_id = bool(call_id and slot.id and call_id != slot.id)
            repeated = name != slot.name or (slot.arguments_complete() and bool(arguments.strip()))
            if slot.name and (other_id or repeated):
                position = None
        if position is None:
            self._slots.append(_Slot())
            position = len(self._slots) - 1
        if isinstance(index, int) and not isinstance(index, bool):
            self._by_index[index] = position
        return position

    def calls(self) -> list[ToolCall]:
        """The calls so far, each with the provider's id (or a new one if it sent none) and its
        arguments exactly as streamed ("" becomes "{}"). Ids are made unique by the loop, which
        knows the whole transcript."""
        result = []
        for slot in self._slots:
            if not slot.name:
                continue  # a fragment with no name never became a callable tool
            slot.id = slot.id or new_call_id()  # once, so every snapshot names the call alike
            arguments = "".join(slot.parts).strip() or "{}"
            result.append(ToolCall(id=slot.id, name=slot.name, arguments=arguments))
        return result


def get_field(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)
