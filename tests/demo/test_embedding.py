"""The demo embedding model: deterministic unit vectors, words of one concept near each other,
served through LiteLLM's embedding calls (sync and async) as `demo/<name>`."""

from __future__ import annotations

import asyncio
import math

import litellm

import demo
from demo.embedding import DIMENSIONS, concept, vector


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_deterministic_unit_vectors() -> None:
    first = vector("Delete the old files")
    assert first == vector("Delete the old files")
    assert len(first) == DIMENSIONS and math.isclose(sum(v * v for v in first), 1.0)
    assert math.isclose(sum(v * v for v in vector("")), 1.0)  # nothing to say still gets a vector


def test_synonyms_and_word_forms_meet_unrelated_words_do_not() -> None:
    assert concept("deleting") == concept("erase") == concept("removed")
    assert concept("files") == concept("file")
    assert _cosine(vector("erase the file"), vector("deleting files")) > 0.9
    assert _cosine(vector("erase the file"), vector("company car booking")) == 0.0


def test_litellm_serves_it_sync_and_async() -> None:
    demo.register()

    response = litellm.embedding(model="demo/embed", input=["erase a file", "book a car"])
    later = asyncio.run(litellm.aembedding(model="demo/embed", input=["erase a file"]))

    assert [item["index"] for item in response.data] == [0, 1]
    assert response.data[0]["embedding"] == vector("erase a file") == later.data[0]["embedding"]
    assert response.usage is not None and response.usage.prompt_tokens == 6
