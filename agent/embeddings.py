"""Embeddings and reranking through LiteLLM: the seam's two non-chat calls (beside llm.py, with
the same retry policy and error lists). Plain Python, no Django: callers hand in a ModelConfig
built from their own settings.

`embed` sends texts in batches (providers cap the inputs of one request) and returns one vector
per text, in order. `rerank` returns the documents' indexes, best first. Both retry what is
worth retrying (rate limits, a provider briefly down), with backoff, and raise ProviderError
with a message fit to show a person otherwise.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import providers
from .accumulator import get_field
from .exceptions import ProviderError
from .model_config import ModelConfig

if TYPE_CHECKING:
    from types import ModuleType

log = logging.getLogger(__name__)

# Inputs per request: OpenAI takes 2048, Cohere 96, most local servers fewer; 64 suits them all.
BATCH = 64
# Characters of one input: well under the 8k tokens most embedding models read.
MAX_INPUT_CHARS = 8000


@functools.cache
def _litellm() -> ModuleType:
    """LiteLLM, imported at the first embedding or rerank call: importing it takes seconds of
    CPU, and the web process and most management commands import this module (a knowledge
    search's views) without ever embedding anything."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map fetch at import
    import litellm

    litellm.suppress_debug_info = True
    # The same policy as chat calls (llm.py): a parameter a provider does not take is dropped.
    litellm.drop_params = True
    return litellm


def _kwargs(config: ModelConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = dict(config.extra)
    kwargs.update(model=config.model, timeout=config.timeout_s, max_retries=0, num_retries=0)
    if config.api_base:
        kwargs["api_base"] = config.api_base
    if config.api_key:
        kwargs["api_key"] = config.api_key
    return kwargs


def _call(config: ModelConfig, fn: Callable[..., Any], **kwargs: Any) -> Any:
    from .provider_errors import ABORT_ERRORS, RETRYABLE_ERRORS, describe_error, retry_after_seconds

    providers.ensure(config.model)
    attempt = 0
    while True:
        try:
            return fn(**_kwargs(config), **kwargs)
        except RETRYABLE_ERRORS as exc:
            attempt += 1
            retry_after = retry_after_seconds(exc)
            delay = min(max(config.backoff_s * 2.0 ** (attempt - 1), retry_after or 0.0), config.max_wait_s)
            if attempt > config.retries or (retry_after is not None and retry_after > config.max_wait_s):
                raise ProviderError(describe_error(exc)[1], kind=describe_error(exc)[0], retryable=True) from exc
            time.sleep(delay)
        except ABORT_ERRORS as exc:
            kind, message = describe_error(exc)
            raise ProviderError(message, kind=kind) from exc
        except Exception as exc:  # an unknown provider failure still ends as a clear error
            kind, message = describe_error(exc)
            raise ProviderError(message, kind=kind) from exc


def embed(config: ModelConfig, texts: Sequence[str], batch: int = BATCH) -> list[list[float]]:
    """One vector per text, in order (`litellm.embedding`, `batch` texts a request)."""
    vectors: list[list[float]] = []
    for start in range(0, len(texts), batch):
        part = [text[:MAX_INPUT_CHARS] or " " for text in texts[start : start + batch]]
        response = _call(config, _litellm().embedding, input=part)
        data = sorted(get_field(response, "data") or [], key=lambda item: get_field(item, "index") or 0)
        if len(data) != len(part):
            raise ProviderError(f"The embedding model answered {len(data)} vectors for {len(part)} texts.")
        vectors.extend([float(x) for x in get_field(item, "embedding")] for item in data)
    return vectors


def rerank(config: ModelConfig, query: str, documents: Sequence[str], top_n: int | None = None) -> list[int]:
    """The documents' indexes, most relevant first (`litellm.rerank`)."""
    if not documents:
        return []
    response = _call(
        config,
        _litellm().rerank,
        query=query,
        documents=list(documents),
        top_n=top_n or len(documents),
        return_documents=False,
    )
    results = get_field(response, "results") or []
    ranked = sorted(results, key=lambda item: -float(get_field(item, "relevance_score") or 0.0))
    order = [int(get_field(item, "index")) for item in ranked if 0 <= int(get_field(item, "index")) < len(documents)]
    return list(dict.fromkeys(order))
