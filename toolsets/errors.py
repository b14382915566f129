"""What a failed tool call reports (`ToolError`), and how often a call is tried."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from core.redact import redact

from .base import Tool

ErrorType = str  # one of ERROR_TYPES
ERROR_TYPES = (
    "validation_error",
    "permission_denied",
    "unknown_tool",
    "timeout_error",
    "rate_limit_error",
    "execution_error",
    "circuit_open",
)
# A transient failure of a tool without side effects is tried again, this many times in all.
MAX_ATTEMPTS: Final = 3
BACKOFF_S = 0.5


@dataclass
class ToolError:
    type: ErrorType
    message: str
    retryable: bool = False
    details: list[str] = field(default_factory=list)
    # The tool's own fault (a timeout, a crash, a 5xx, a lost connection): what circuit
    # breakers count. Bad arguments, a missing key or a refusal are the caller's business.
    fault: bool = False

    def __post_init__(self) -> None:
        # A tool's exception may quote its credential (an API echoing the key back): the text
        # goes to the model, the card, the API caller and the audit record, so it is redacted
        # once, here, where every tool error is made.
        self.message = redact(self.message)
        self.details = [redact(detail) for detail in self.details]

    @property
    def full_message(self) -> str:
        return "\n".join([self.message, *self.details])

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "message": self.message, "retryable": self.retryable}
        if self.details:
            data["details"] = self.details
        return data


def lease_s(tool_: Tool) -> float:
    # Long enough for every attempt and backoff of one call; a probe whose worker died frees
    # the breaker after this.
    return tool_.timeout_s * MAX_ATTEMPTS + BACKOFF_S * 2**MAX_ATTEMPTS + 5
