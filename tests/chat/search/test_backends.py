"""The search index on the database the tests run on: SQLite by default, PostgreSQL in CI's
second pass (DATABASE_URL)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from chat.models import Chat, Message, Turn
from chat.search import backends, query, service

pytestmark = pytest.mark.django_db


def find(user: Any, text: str) -> list[int]:
    return [r.chat_id for r in service.find(user.pk, query.terms(text))]


def add(chat: Chat, role: str, content: str, **fields: Any) -> Message:
    turn = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    return Message.objects.create(chat=chat, turn=turn, role=role, content=content, **fields)


@pytest.fixture
def chats(user: Any) -> dict[str, Chat]:
    trip = Chat.objects.create(owner=user, title="Trip to Kyoto")
    add(trip, "user", "Which temples should I see?")
    add(trip, "assistant", "Kinkaku-ji and Fushimi Inari are the classics.")
    budget = Chat.objects.create(owner=user, title="Budget")
    add(budget, "user", "Plan the Q3 marketing budget for the webinar series")
    return {"trip": trip, "budget": budget}


def test_finds_titles_and_message_text_by_word_prefix(user: Any, chats: dict[str, Chat]) -> None:
    assert find(user, "kyo") == [chats["trip"].pk]
    assert find(user, "TEMPLES") == [chats["trip"].pk]
    assert find(user, "fushimi inar") == [chats["trip"].pk]
    assert find(user, "webin") == [chats["budget"].pk]
    assert find(user, "q3 budget") == [chats["budget"].pk]
    assert find(user, "temples budget") == []  # every term must match the same text
    assert find(user, "emples") == []  # a word's start, not any substring


def test_results_are_newest_first_with_highlighted_title_and_snippet(user: Any, chats: dict[str, Chat]) -> None:
    add(chats["trip"], "user", "And the budget for the trip?")
    results = service.find(user.pk, query.terms("budget"))
    assert [r.chat_id for r in results] == [chats["trip"].pk, chats["budget"].pk] or [
        r.chat_id for r in results
    ] == sorted((chats["trip"].pk, chats["budget"].pk), key=lambda pk: -Chat.objects.get(pk=pk).updated_at.timestamp())
    budget = next(r for r in results if r.chat_id == chats["budget"].pk)
    assert budget.title == "<mark>Budget</mark>"
    trip = next(r for r in results if r.chat_id == chats["trip"].pk)
    assert trip.snippet == "And the <mark>budget</mark> for the trip?"
    assert trip.role == "user"


def test_only_the_owners_chats_are_found(user: Any, other_user: Any, chats: dict[str, Chat]) -> None:
    theirs = Chat.objects.create(owner=other_user, title="Kyoto for mallory")
    add(theirs, "user", "temples")
    assert find(user, "kyoto") == [chats["trip"].pk]
    assert find(other_user, "temples") == [theirs.pk]
    assert find(other_user, "fushimi") == []


def test_edits_are_searchable_at_once_and_old_text_is_gone(user: Any, chats: dict[str, Chat]) -> None:
    message = Message.objects.get(chat=chats["trip"], role="user")
    message.content = "Which gardens should I see?"
    message.save()
    assert find(user, "temples") == []
    assert find(user, "gardens") == [chats["trip"].pk]
    Message.objects.filter(pk=message.pk).update(content="Where is the ryokan?")
    assert find(user, "gardens") == []
    assert find(user, "ryokan") == [chats["trip"].pk]
    chats["trip"].title = "Osaka"
    chats["trip"].save()
    assert find(user, "kyoto") == []
    assert find(user, "osaka") == [chats["trip"].pk]


def test_deleted_messages_and_chats_are_not_found(user: Any, chats: dict[str, Chat]) -> None:
    Message.objects.filter(chat=chats["trip"], role="assistant").delete()
    assert find(user, "fushimi") == []
    assert find(user, "temples") == [chats["trip"].pk]
    chats["trip"].delete()
    assert find(user, "temples") == []
    assert find(user, "kyoto") == []
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM chatsearch_message_fts")
            assert cursor.fetchone()[0] == Message.objects.filter(role__in=["user", "assistant"], lane="").count()
            cursor.execute("SELECT count(*) FROM chatsearch_chat_fts")
            assert cursor.fetchone()[0] == Chat.objects.count()


def test_tool_results_system_messages_and_subagent_lanes_are_not_indexed(user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Plain")
    add(chat, "tool", "zanzibar from a tool", tool_call_id="call_1")
    add(chat, "system", "zanzibar in instructions")
    add(chat, "assistant", "zanzibar from a subagent", lane="0-0")
    assert find(user, "zanzibar") == []
    add(chat, "assistant", "zanzibar at last")
    assert find(user, "zanzibar") == [chat.pk]


def test_a_role_or_lane_change_moves_a_message_in_or_out_of_the_index(user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Plain")
    message = add(chat, "assistant", "quokka", lane="0-0")
    assert find(user, "quokka") == []
    Message.objects.filter(pk=message.pk).update(lane="")
    assert find(user, "quokka") == [chat.pk]


HOSTILE = [
    '"',
    "'",
    "''''",
    '"unterminated',
    "AND",
    "OR NOT NEAR",
    "NEAR(kyoto temples, 2)",
    "kyoto*",
    "*",
    "-kyoto",
    "^kyoto",
    "title:kyoto",
    "body:kyoto OR 1",
    "kyoto) OR (1=1",
    "'; DROP TABLE chat_chat; --",
    "':* & !'",
    "kyoto:*",
    "kyoto & !",
    "\x00",
    "kyo\x00to",
    "%",
    "_",
    "\\",
    "<script>alert(1)</script>",
    "k" * 100_000,
    " ".join(["kyoto"] * 10_000),
    "🙂 kyoto",
    "ｋｙｏｔｏ",
    "\u202ekyoto",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_fail(user: Any, chats: dict[str, Chat], text: str) -> None:
    results = find(user, text)
    assert set(results) <= {chats["trip"].pk, chats["budget"].pk}


@pytest.mark.parametrize("text", ['"kyoto"', "kyoto*", "-kyoto", "title:kyoto", "kyoto) OR (1=1", "\x00kyoto\x00"])
def test_syntax_characters_are_only_separators(user: Any, chats: dict[str, Chat], text: str) -> None:
    expected = [chats["trip"].pk] if query.terms(text) == ["kyoto"] else []
    assert find(user, text) == expected


def test_huge_messages_are_indexed_up_to_the_limit(user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Log")
    add(chat, "assistant", "early " + "filler " * 20_000 + " " + "x" * query.INDEXED_CHARS + " lateword")
    assert find(user, "early") == [chat.pk]
    assert find(user, "lateword") == []


def test_non_latin_text_is_found(user: Any) -> None:
    chat = Chat.objects.create(owner=user, title="Straße")
    add(chat, "user", "Привет, как дела? Ελληνικά")
    assert find(user, "стра") == []
    assert find(user, "привет") == [chat.pk]
    assert find(user, "ελλην") == [chat.pk]
    assert find(user, "straße") == [chat.pk]


def test_search_costs_the_same_few_queries_for_many_results(user: Any, django_assert_max_num_queries: Any) -> None:
    for i in range(30):
        chat = Chat.objects.create(owner=user, title=f"Note {i}")
        add(chat, "user", f"shared word {i}")
    with django_assert_max_num_queries(4):
        results = service.find(user.pk, query.terms("shared"))
    assert len(results) == service.LIMIT


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite keeps its index with triggers")
def test_repair_restores_triggers_dropped_by_a_table_rebuild(user: Any, chats: dict[str, Chat]) -> None:
    with connection.cursor() as cursor:
        for name in backends.SQLITE_TRIGGERS:
            cursor.execute(f"DROP TRIGGER {name}")
    Message.objects.filter(chat=chats["trip"], role="user").update(content="gardens")
    assert find(user, "gardens") == []  # stale while the triggers are gone
    assert backends.repair(connection) is True
    assert find(user, "gardens") == [chats["trip"].pk]
    assert find(user, "temples") == []
    assert backends.repair(connection) is False
    add(chats["budget"], "user", "aardvark")
    assert find(user, "aardvark") == [chats["budget"].pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's expression indexes")
def test_postgresql_queries_use_the_expression_indexes(user: Any, chats: dict[str, Chat]) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM chat_message m WHERE {backends.INDEXED_WHERE} AND "
            f"{backends._pg_vector(f'left(m.content, {query.INDEXED_CHARS})')} @@ to_tsquery('simple'::regconfig, %s)",
            [query.tsquery(["kyoto"])],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "chatsearch_message_tsv" in plan
        cursor.execute(
            f"EXPLAIN SELECT id FROM chat_chat WHERE {backends.PG_TITLE_VECTOR} @@ to_tsquery('simple'::regconfig, %s)",
            [query.tsquery(["kyoto"])],
        )
        assert "chatsearch_chat_tsv" in "\n".join(row[0] for row in cursor.fetchall())


def test_only_the_version_a_chat_shows_is_found(user: Any) -> None:
    """An edited question's first version stays stored (the versions switcher shows it again)
    but is not found: the chat would open on the other version."""
    from chat import branches

    chat = Chat.objects.create(owner=user, title="Travel")
    first = Turn.objects.create(chat=chat, status=Turn.Status.COMPLETED)
    Message.objects.create(chat=chat, turn=first, role="user", content="Flights to Lisbon in May")
    edited = Turn(chat=chat, status=Turn.Status.COMPLETED, parent=None)
    edited.first_of_branch = True  # another version of the first exchange, as an edit makes it
    edited.save()
    Message.objects.create(chat=chat, turn=edited, role="user", content="Trains to Porto in June")
    branches.choose(edited)

    assert find(user, "lisbon") == []
    assert find(user, "porto") == [chat.pk]
    branches.choose(first)
    assert find(user, "lisbon") == [chat.pk]
    assert find(user, "porto") == []
