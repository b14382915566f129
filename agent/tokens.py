"""What a request costs in tokens, and where it marks the provider's prompt cache: the counting
the context fitter does on every call (cached per process), and Anthropic-style cache markers
for the providers that take them. Part of the LiteLLM seam (`llm`), which imports LiteLLM first
(with its cost map kept local)."""

from __future__ import annotations

import functools
import json
from typing import Any

import litellm

from .context import Budget

# The answer reserve when neither the admin nor LiteLLM's model info gives one.
DEFAULT_RESERVE = 4096


def context_budget(model: str, context_limit: int | None, answer_reserve: int | None, extra: dict[str, Any]) -> Budget:
    """The model's input budget: the admin's override (`context_limit`), else LiteLLM's
    `max_input_tokens` (or `max_tokens`) for the model; the answer's reserve: the admin's, else
    the answer length the request asks for (`max_tokens` in the extra parameters), else the
    model's maximum output capped at DEFAULT_RESERVE and at a quarter of the window."""
    info = _model_info(model)
    limit = context_limit or count(info.get("max_input_tokens")) or count(info.get("max_tokens")) or None
    if answer_reserve is not None:
        reserve = answer_reserve
    else:
        asked = count(extra.get("max_tokens")) or count(extra.get("max_completion_tokens"))
        reserve = asked or min(count(info.get("max_output_tokens")) or DEFAULT_RESERVE, DEFAULT_RESERVE)
        if limit:
            reserve = min(reserve, limit // 4)
    return Budget(limit, reserve)


# What LiteLLM knows of a model is fixed for the process (its cost map is loaded once, from the
# package): looked up once per model, not on every turn (45 µs a turn for a model it does not know,
# which raises).
@functools.lru_cache(maxsize=256)
def _model_info(model: str) -> dict[str, Any]:
    try:
        return dict(litellm.get_model_info(model))
    except Exception:  # LiteLLM raises for models it does not know: the budget is then unknown
        return {}


@functools.lru_cache(maxsize=50_000)
def message_tokens(model: str, message: str) -> int:
    # Every turn fits the chat's whole transcript again, in a new fitter: counting each message
    # once per process (not once per turn) keeps fitting a long chat's call to milliseconds.
    try:
        return int(litellm.token_counter(model=model, messages=[json.loads(message)]))
    except Exception:  # an odd part LiteLLM cannot count: about four characters a token
        return len(message) // 4 + 4


@functools.lru_cache(maxsize=1_000)
def tools_tokens(model: str, tools: str) -> int:
    # The same definitions are counted on every call of a turn, and every turn of a chat.
    try:
        with_tools = litellm.token_counter(model=model, messages=[], tools=json.loads(tools))
        return int(with_tools) - int(litellm.token_counter(model=model, messages=[]))
    except Exception:
        return len(tools) // 4


# Providers whose requests carry explicit cache markers (Anthropic's `cache_control`), as LiteLLM
# passes them on; the others cache a repeated prefix by themselves (OpenAI, DeepSeek, Gemini…).
_MARKED_PROVIDERS = {"anthropic", "bedrock", "vertex_ai", "vertex_ai_beta"}


@functools.lru_cache(maxsize=256)
def takes_cache_markers(model: str) -> bool:
    try:
        from litellm.utils import supports_prompt_caching

        provider = litellm.get_llm_provider(model)[1]
        return provider in _MARKED_PROVIDERS and "claude" in model.lower() and bool(supports_prompt_caching(model))
    except Exception:  # a model LiteLLM cannot place: no markers, nothing lost
        return False


def with_cache_markers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy with cache breakpoints after the stable prefix (tools, the system prompt with its
    catalogue and summary) and after the newest question, so the next call of the turn reads
    both from the cache."""
    marked = list(messages)
    head = 0
    while head < len(marked) and marked[head].get("role") == "system":
        head += 1
    places = [head - 1] if head else []
    if marked and marked[-1].get("role") == "user" and len(marked) - 1 not in places:
        places.append(len(marked) - 1)
    for index in places:
        content = marked[index].get("content")
        if isinstance(content, str) and content:
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list) and content:
            blocks = [dict(part) if isinstance(part, dict) else part for part in content]
        else:
            continue
        if isinstance(blocks[-1], dict):
            blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
        marked[index] = {**marked[index], "content": blocks}
    return marked


def count(value: Any) -> int:
    """A token count a provider or LiteLLM reported, or 0 for anything that is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
