"""The spending check before each model call, as the loop sees it (no Django here).

The worker gives the loop a `Budget`: `reserve()` runs before every model call and either
returns a reservation (what the call may spend at most, already counted as spent) or raises
`OverBudget`; `settle()` runs after the call, with what the provider reported, to give back the
part of the reservation the call did not use. The loop ends the turn with `OverBudget`'s
message, keeping everything already streamed.
"""

from __future__ import annotations

from typing import Any, Protocol

from .exceptions import AgentStop
from .types import Usage


class OverBudget(AgentStop):
    """A model call would pass the user's budget. `message` is safe to show to the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Budget(Protocol):
    async def reserve(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        """Counts a model call's most expensive outcome as spent, or raises OverBudget."""
        ...

    async def settle(self, reservation: Any, usage: Usage) -> None:
        """Replaces the reservation with what the call used (the provider's usage)."""
        ...
