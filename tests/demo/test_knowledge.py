from __future__ import annotations

import pytest

from demo import knowledge


@pytest.mark.parametrize(
    ("message", "query"),
    [
        ("Search the knowledge base for the proxy setting", "the proxy setting"),
        ("What does the handbook say about parental leave?", "parental leave"),
        ("search our docs for VPN setup.", "VPN setup"),
        ("According to the knowledge base, where is the proxy configured?", "where is the proxy configured"),
    ],
)
def test_knowledge_questions_become_a_search(message: str, query: str) -> None:
    (intent,) = knowledge.intents(message)

    assert (intent.toolset, intent.tool, intent.arguments) == ("knowledge", "search_knowledge", {"query": query})


def test_other_searches_are_left_to_other_tools() -> None:
    assert knowledge.intents("search the web for the proxy setting") == []
    assert knowledge.intents("what time is it in Tokyo?") == []


def test_the_answer_quotes_each_passage_with_its_citation() -> None:
    result = {
        "query": "proxy",
        "retrieval": "keyword",
        "passages": [{"title": "guide.md", "heading": "Guide › Proxy", "text": "It is under Network. More here."}],
        "sources": [{"n": 3}],
    }

    text = knowledge.RENDERERS["search_knowledge"](result, {})

    assert text == (
        "Here is what the knowledge base says about “proxy”:\n\n"
        "- **guide.md › Guide › Proxy**: “It is under Network. More here.” [3]"
    )
    assert knowledge.RENDERERS["search_knowledge"]({"passages": [], "retrieval": "keyword", "query": "x"}, {}) == (
        "The knowledge base has nothing about “x”."
    )
