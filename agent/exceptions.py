"""Stop conditions of the loop. They are exceptions so that every exit path is explicit."""

from __future__ import annotations


class AgentStop(Exception):
    """Base of everything that ends a turn."""


class Finished(AgentStop):
    """The model answered without asking for tools."""


class Cancelled(AgentStop):
    """The user pressed Stop."""


class ProviderError(AgentStop):
    """The model provider failed in a way retries did not fix.

    `message` is safe to show to the user; `kind` is a short machine name for the error.
    """

    def __init__(self, message: str, *, kind: str = "provider_error", retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retryable = retryable
