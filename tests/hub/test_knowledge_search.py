"""A knowledge search by an `/mcp` client runs its tool in the web process: with the offline
`demo/embed` model configured, that process registers the demo model at its first use
(agent/providers.py, declared in config/providers.py) and the search is hybrid, as in a chat,
instead of falling back to keywords with a provider failure."""

from __future__ import annotations

import time
from typing import Any

import pytest
from mcp.client import Client

from knowledge import ingest
from knowledge.models import Document, KnowledgeBase, RetrievalSettings

from .mcp_client import MODES, run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PROXY = b"# Network\n\n## Proxy\n\nThe proxy setting lives in Preferences, under Network.\n"


def _indexed(base: KnowledgeBase, name: str, data: bytes) -> Document:
    document, _ = ingest.add(base, name, data)
    ingest.index(document.pk)  # or the stack's files worker takes it first: wait for either
    deadline = time.monotonic() + 60
    document.refresh_from_db()
    while document.status != Document.Status.READY:
        assert document.status != Document.Status.FAILED and time.monotonic() < deadline, document.error
        time.sleep(0.1)
        document.refresh_from_db()
    return document


@pytest.mark.parametrize("mode", MODES)
def test_a_search_through_mcp_embeds_its_query_with_the_demo_model_in_the_web_process(
    stack: Any, switched_on: None, token: str, user: Any, mode: str
) -> None:
    row = RetrievalSettings.load()
    row.embedding_model = "demo/embed"
    row.save()
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    document = _indexed(base, "network.md", PROXY)
    assert document.chunk_count == 1

    async def work(client: Client) -> Any:
        return await client.call_tool("toolset__knowledge__search_knowledge", {"query": "where is the proxy setting"})

    result = run(stack.url, token, mode, work)
    assert not result.is_error, result.content
    found = result.structured_content
    assert found is not None, result.content
    assert found["retrieval"] == "hybrid", found["note"]
    assert "failed" not in found["note"] and found["passages"][0]["title"] == "network.md"
