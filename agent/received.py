"""What one streamed answer has delivered, and what the call has cost: part of the LiteLLM seam
(`llm`, which imports LiteLLM first, with its cost map kept local).

Every model call is paid for, however it ends. A call the provider finished is charged the
usage it reported (or, when it reported none, its prompt and answer as LiteLLM's tokenizer counts
them). A call that ended early (Stop, a caller who hung up, a provider failure mid-stream, any
exception) is charged what was spent: the prompt and the answer received so far, counted with
`litellm.token_counter` where the provider sent no usage. A call the provider never accepted (an
error answer, a request still on its way when it was stopped) costs nothing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import litellm

from .accumulator import ToolCallAccumulator
from .tokens import count as _count
from .types import AssistantMessage, Usage

log = logging.getLogger(__name__)


class Received:
    """The parts of one streamed answer as they arrive, with the request they answer."""

    def __init__(
        self, model: str = "", messages: list[dict[str, Any]] | None = None, tools: list[dict[str, Any]] | None = None
    ) -> None:
        self.model = model
        self.messages = messages or []
        self.tools = tools
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls = ToolCallAccumulator()
        self.usage = Usage()  # the provider's last report; the whole call's once `complete`
        self.finish_reason: str | None = None
        self.reported = False  # the provider reported usage at least once
        # The provider accepted the request (its stream is open): from here on the call costs.
        self.accepted = False
        self.complete = False  # the stream ended on its own and `usage` is the whole call's
        self.fragments = 0  # tool-call deltas received (part of what `spent` caches on)
        self._spent: tuple[tuple[int, ...], Usage] | None = None

    def message(self) -> AssistantMessage:
        return AssistantMessage(
            content="".join(self.text),
            tool_calls=self.calls.calls(),
            finish_reason=self.finish_reason,
            usage=self.usage,
            reasoning="".join(self.reasoning),
        )

    def finish(self) -> AssistantMessage:
        """The whole answer, once the stream has ended on its own: the provider's usage, else
        the request and the answer as LiteLLM counts them."""
        self.complete = True
        answer = self.message()
        if not self.reported:
            answer.usage = self.usage = counted_usage(self.model, self.messages, self.tools, answer)
        return answer

    def spent(self) -> Usage:
        """What the call has cost so far (see the module docstring). For a call cut short, the
        provider's report where it gave one (a running report can lag behind the answer: the
        answer as counted is taken when it is longer), else the count; never both added."""
        if self.complete:
            return self.usage
        if not self.accepted:
            return Usage()
        # Read after the stream has ended, often twice (content, then usage): counted once.
        key = (
            len(self.text),
            len(self.reasoning),
            self.fragments,
            self.usage.prompt_tokens,
            self.usage.completion_tokens,
        )
        if self._spent is not None and self._spent[0] == key:
            return self._spent[1]
        counted = counted_usage(
            self.model, self.messages, self.tools, self.message(), prompt=not self.usage.prompt_tokens
        )
        spent = Usage(
            prompt_tokens=self.usage.prompt_tokens or counted.prompt_tokens,
            completion_tokens=max(self.usage.completion_tokens, counted.completion_tokens),
            cached_tokens=self.usage.cached_tokens,
        )
        self._spent = (key, spent)
        return spent


def counted_usage(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    message: AssistantMessage,
    *,
    prompt: bool = True,
) -> Usage:
    """Usage as LiteLLM's tokenizer counts it, for a provider that reported none: the request
    (unless `prompt` is off) and what the model wrote of the answer — its text, its reasoning
    (billed as output by the providers that stream it) and its tool calls. Where LiteLLM cannot
    count (an odd part it does not know), about four characters a token: a call is never free
    for want of a tokenizer."""
    output = message.reasoning + message.content + "".join(call.name + call.arguments for call in message.tool_calls)
    prompt_tokens = completion_tokens = 0
    if prompt:
        try:
            prompt_tokens = litellm.token_counter(model=model, messages=messages, tools=tools)  # type: ignore[arg-type]
        except Exception:
            log.debug("Counting the prompt for %s failed", model, exc_info=True)
            prompt_tokens = len(json.dumps([messages, tools or []], default=str)) // 4
    if output:
        try:
            completion_tokens = litellm.token_counter(model=model, text=output, count_response_tokens=True)
        except Exception:
            log.debug("Counting the answer of %s failed", model, exc_info=True)
            completion_tokens = len(output) // 4 + 1
    return Usage(prompt_tokens=_count(prompt_tokens), completion_tokens=_count(completion_tokens))
