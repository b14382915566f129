"""The Knowledge tools: passages with handles, reading by handle, citations, and the caller's
groups checked on every call."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from knowledge import retrieval
from knowledge.models import ChatBase
from knowledge.tools import read_knowledge, search_knowledge, toolset
from toolsets.base import ToolContext
from toolsets.registry import get_toolset

pytestmark = pytest.mark.django_db

GUIDE = b"# Guide\n\n## Proxy\n\nThe proxy setting lives in Preferences, under Network.\n\n## Leave\n\nAsk your lead."


def _search(user: Any, query: str, **kwargs: Any) -> dict[str, Any]:
    return search_knowledge.func(ToolContext(user_id=user.pk, chat_id=kwargs.pop("chat_id", None)), query, **kwargs)


def test_the_toolset_is_registered() -> None:
    assert get_toolset("knowledge") is toolset


def test_search_returns_passages_with_handles_links_and_the_lexical_note(
    user: Any, make_base: Any, add_document: Any
) -> None:
    document = add_document(make_base(user), "guide.md", GUIDE)

    result = _search(user, "Where is the proxy setting?")

    (hit,) = result["passages"]
    chunk = document.chunks.get(heading="Guide › Proxy")
    assert hit["handle"] == f"p{chunk.pk}" and hit["document"] == f"d{document.pk}"
    assert hit["heading"] == "Guide › Proxy" and hit["link"].endswith(f"?passage={chunk.pk}#passage-{chunk.pk}")
    assert result["retrieval"] == "keyword" and "no embedding model" in result["note"]
    sources = search_knowledge.sources(result)  # type: ignore[misc]
    assert sources[0]["title"] == "guide.md › Guide › Proxy" and sources[0]["url"] == hit["link"]


def test_read_by_passage_and_by_document_page(user: Any, make_base: Any, add_document: Any) -> None:
    document = add_document(make_base(user), "guide.md", GUIDE)
    first = document.chunks.get(position=0)
    ctx = ToolContext(user_id=user.pk)

    passage = read_knowledge.func(ctx, f"p{first.pk}")
    whole = read_knowledge.func(ctx, f"d{document.pk}")

    assert passage["text"].startswith("The proxy setting") and passage["next"].startswith("p")
    assert (whole["page"], whole["pages"]) == (1, 1)
    assert "## Guide › Leave" in whole["text"]
    with pytest.raises(ValueError, match="page"):
        read_knowledge.func(ctx, f"d{document.pk}", 2)
    with pytest.raises(ValueError, match="handle"):
        read_knowledge.func(ctx, "drop table")


def test_a_base_is_private_until_shared_with_a_group(
    user: Any, other_user: Any, make_base: Any, add_document: Any
) -> None:
    team = Group.objects.create(name="Team")
    base = make_base(user)
    document = add_document(base, "guide.md", GUIDE)
    chunk = document.chunks.first()

    with pytest.raises(LookupError, match="no knowledge bases"):
        _search(other_user, "proxy")
    with pytest.raises(LookupError, match="no passage"):
        read_knowledge.func(ToolContext(user_id=other_user.pk), f"p{chunk.pk}")

    base.groups.set([team])
    other_user.groups.add(team)
    assert _search(other_user, "proxy")["count"] == 1

    other_user.groups.remove(team)  # read fresh: a removal counts at the next call
    with pytest.raises(LookupError):
        _search(other_user, "proxy")
    with pytest.raises(LookupError):
        _search(other_user, "proxy", bases=[base.pk])


def test_no_user_no_bases() -> None:
    with pytest.raises(LookupError):
        retrieval.search(None, "proxy")


def test_filters_by_base_and_document_and_the_chats_attached_bases(
    user: Any, make_base: Any, add_document: Any
) -> None:
    from chat.models import Chat

    one, two = make_base(user, "One"), make_base(user, "Two")
    first = add_document(one, "a.md", b"Routers need firmware updates.")
    add_document(two, "b.md", b"Firmware for printers ships monthly.")

    assert _search(user, "firmware")["count"] == 2
    assert [p["base"] for p in _search(user, "firmware", bases=[two.pk])["passages"]] == ["Two"]
    assert [p["document"] for p in _search(user, "firmware", documents=[first.pk])["passages"]] == [f"d{first.pk}"]
    chat = Chat.objects.create(owner=user)
    ChatBase.objects.create(chat=chat, base=one)
    assert [p["base"] for p in _search(user, "firmware", chat_id=chat.pk)["passages"]] == ["One"]
    with pytest.raises(LookupError, match="no knowledge base with that id"):
        _search(user, "firmware", bases=[999_999])


def test_deleting_a_document_or_a_base_leaves_no_hit(user: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)
    document = add_document(base, "guide.md", GUIDE)
    add_document(base, "other.md", b"The proxy is also mentioned here.")
    assert _search(user, "proxy")["count"] == 2

    document.delete()
    assert [p["title"] for p in _search(user, "proxy")["passages"]] == ["other.md"]

    base.delete()
    from knowledge import lexical

    assert lexical.search(["proxy"], [base.pk]) == []
    from django.db import connection

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM knowledge_chunk_fts WHERE knowledge_chunk_fts MATCH 'proxy'")
            assert cursor.fetchone()[0] == 0


@pytest.mark.parametrize("query", ['"', "AND OR NOT", "proxy*", "NEAR(a b)", "'; DROP TABLE x; --", "\x00", "ü" * 600])
def test_hostile_queries_never_fail(user: Any, make_base: Any, add_document: Any, query: str) -> None:
    add_document(make_base(user), "guide.md", GUIDE)
    try:
        _search(user, query)
    except ValueError as exc:
        assert "query" in str(exc)


def test_offered_to_a_model_only_when_the_user_can_see_a_base(user: Any, other_user: Any, make_base: Any) -> None:
    from chat.worker.tools import ChatToolBox
    from hub.mcp_server import listed_tools

    def offered(who: Any) -> set[str]:
        box = ChatToolBox(user_id=who.pk, turn_id=0, selection={"knowledge": ["search_knowledge", "read_knowledge"]})
        box.prepare()
        names = {spec["function"]["name"] for spec in box.specs()} | {t.name for t in listed_tools(who.pk)}
        return {name for name in names if "knowledge" in name}

    assert offered(user) == set()
    team = Group.objects.create(name="Readers")
    make_base(user, groups=[team])
    assert offered(user) == {"toolset__knowledge__search_knowledge", "toolset__knowledge__read_knowledge"}
    assert not offered(other_user)
    other_user.groups.add(team)
    assert offered(other_user) == {
        "toolset__knowledge__search_knowledge",
        "toolset__knowledge__read_knowledge",
    }
