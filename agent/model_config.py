"""What a model call needs to know: the model, where it is served, its limits. A module of its own
so the seam (llm.py) and the fast path (openai_stream.py) both read it without importing each
other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Longest wait before a retry. A provider asking for a longer one (Retry-After) will not have
# recovered within a turn anyone waits for: the turn fails at once with the provider's error.
MAX_RETRY_WAIT_S = 30.0


@dataclass
class ModelConfig:
    model: str
    api_base: str | None = None
    api_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    retries: int = 3
    backoff_s: float = 1.0
    timeout_s: float = 120.0
    max_wait_s: float = MAX_RETRY_WAIT_S
    # Read OpenAI-compatible streams without LiteLLM's per-chunk wrapper (TESSERA_FAST_PATH).
    fast_path: bool = True
    # Prompts and answers in the model-call spans (an admin's opt-in; agent/spans.py).
    trace_content: bool = False
    # The admin's context window override (input tokens) and answer reserve; None: from
    # LiteLLM's model info (see `context_budget`).
    context_limit: int | None = None
    answer_reserve: int | None = None
