from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from knowledge import lexical

pytestmark = pytest.mark.django_db


def test_terms_drop_common_words_and_syntax() -> None:
    found = lexical.terms('Where is the "proxy" setting* explained? NEAR(a)')
    assert found == ["proxy", "setting", "explained", "near"]
    assert lexical.terms("what is it") == ["what", "is", "it"]  # only common words: kept after all
    assert lexical.terms("?!") == []


def test_stemmed_words_and_headings_match(user: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)
    text = b"# Configuring proxies\n\nSee below.\n\n# Other\n\nThe proxy is configured elsewhere, also proxies."
    document = add_document(base, "a.md", text)

    found = lexical.search(lexical.terms("configure proxy"), [base.pk])

    # Both passages match the stems; the one whose heading holds them ranks first.
    assert found == [document.chunks.get(position=0).pk, document.chunks.get(position=1).pk]


def test_repair_restores_dropped_triggers(user: Any, make_base: Any, add_document: Any) -> None:
    if connection.vendor != "sqlite":
        assert not lexical.repair(connection)
        return
    base = make_base(user)
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER knowledge_chunk_ai")
    assert lexical.repair(connection)
    add_document(base, "a.md", b"firmware notes")
    assert lexical.search(["firmware"], [base.pk])
    assert not lexical.repair(connection)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's stored search column")
def test_postgresql_queries_use_the_stored_column_and_its_index(user: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)
    add_document(base, "proxy.md", b"# Network\n\nThe proxy setting lives under Network.")
    # Written by the server on insert: nothing in Tessera keeps it in step.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM knowledge_chunk WHERE {lexical.PG_COLUMN} @@ to_tsquery('proxy')")
        assert cursor.fetchone()[0] >= 1
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            f"EXPLAIN SELECT id FROM knowledge_chunk WHERE {lexical.PG_COLUMN} @@ to_tsquery('english'::regconfig, %s)",
            ["'proxy'"],
        )
        assert "knowledge_chunk_search" in "\n".join(row[0] for row in cursor.fetchall())
    assert lexical.search(["proxy"], [base.pk])
