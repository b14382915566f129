"""Lexical search over chunks, per database vendor, behind `search()`.

SQLite: an FTS5 table (chunk text and headings, Porter-stemmed) kept in step with
`knowledge_chunk` by triggers, so every write — an indexing run, a cascade from a deleted
document or base — changes it in the same transaction: a deleted document is never found.
PostgreSQL: a stored generated `tsvector` column (`search_vector`, computed by the server on every
write, so nothing needs keeping in step) with a GIN index; ranking reads the stored vector rather
than parsing each matching passage's text again per query, which an OR-ed question over 100 000
passages made a matter of seconds (bench/RESULTS.md).
Other databases fall back to a substring filter. Ranking is BM25 on SQLite and `ts_rank_cd` on
PostgreSQL; headings weigh more than body text on both.

The same approach as chat search (chat/search/backends.py), with two differences made for
retrieval: a question's words are OR-ed (a passage need not hold every word of "where is the
proxy setting explained") and stemmed, and common English words are dropped from it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

from core.fulltext import execute_for_vendor, fetch_rows

MAX_QUERY = 500
MAX_TERMS = 16
MAX_TERM = 64
_WORD = re.compile(r"[^\W_]+")
# Words too common to tell passages apart; they would only make an OR query match everything.
_COMMON = "a about an and are as at be by can do does for from how i in is it its me my of on or that the this to was"
STOPWORDS = frozenset(f"{_COMMON} we what when where which who why will with you your".split(" "))

# --- SQLite -----------------------------------------------------------------------------------

SQLITE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_chunk_fts USING fts5("
    "text, heading, tokenize = 'porter unicode61 remove_diacritics 2')"
)
SQLITE_TRIGGERS = {
    "knowledge_chunk_ai": """
        CREATE TRIGGER IF NOT EXISTS knowledge_chunk_ai AFTER INSERT ON knowledge_chunk BEGIN
          INSERT INTO knowledge_chunk_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
        END""",
    "knowledge_chunk_au": """
        CREATE TRIGGER IF NOT EXISTS knowledge_chunk_au AFTER UPDATE OF text, heading ON knowledge_chunk BEGIN
          DELETE FROM knowledge_chunk_fts WHERE rowid = old.id;
          INSERT INTO knowledge_chunk_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
        END""",
    "knowledge_chunk_ad": """
        CREATE TRIGGER IF NOT EXISTS knowledge_chunk_ad AFTER DELETE ON knowledge_chunk BEGIN
          DELETE FROM knowledge_chunk_fts WHERE rowid = old.id;
        END""",
}
SQLITE_REBUILD = [
    "DELETE FROM knowledge_chunk_fts",
    "INSERT INTO knowledge_chunk_fts(rowid, text, heading) SELECT id, text, heading FROM knowledge_chunk",
]
SQLITE_DROP = [
    *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS),
    "DROP TABLE IF EXISTS knowledge_chunk_fts",
]

# --- PostgreSQL -------------------------------------------------------------------------------

PG_VECTOR = (
    "(setweight(to_tsvector('english'::regconfig, heading), 'A') || "
    "setweight(to_tsvector('english'::regconfig, left(text, 200000)), 'B'))"
)
PG_COLUMN = "search_vector"
PG_INDEXES = [
    f"ALTER TABLE knowledge_chunk ADD COLUMN IF NOT EXISTS {PG_COLUMN} tsvector GENERATED ALWAYS AS {PG_VECTOR} STORED",
    f"CREATE INDEX IF NOT EXISTS knowledge_chunk_search ON knowledge_chunk USING gin ({PG_COLUMN})",
    # The expression index of before the column (the column's index does its work now).
    "DROP INDEX IF EXISTS knowledge_chunk_tsv",
]
PG_DROP = [
    "DROP INDEX IF EXISTS knowledge_chunk_search",
    f"ALTER TABLE knowledge_chunk DROP COLUMN IF EXISTS {PG_COLUMN}",
]


def install(conn: BaseDatabaseWrapper) -> None:
    """Creates the index for this database (the migration, and the repair after migrations)."""
    execute_for_vendor(
        conn, {"sqlite": [SQLITE_TABLE, *SQLITE_TRIGGERS.values(), *SQLITE_REBUILD], "postgresql": PG_INDEXES}
    )


def uninstall(conn: BaseDatabaseWrapper) -> None:
    execute_for_vendor(conn, {"sqlite": SQLITE_DROP, "postgresql": PG_DROP})


def repair(conn: BaseDatabaseWrapper) -> bool:
    """A later migration that rebuilds `knowledge_chunk` (how SQLite alters a table) drops its
    triggers: put them back and rebuild the index. True if anything was repaired."""
    if conn.vendor != "sqlite":
        return False
    with conn.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name LIKE 'knowledge_chunk_%'")
        present = {row[0] for row in cursor.fetchall()}
    if "knowledge_chunk_fts" not in present or set(SQLITE_TRIGGERS) <= present:
        return False
    install(conn)
    return True


# --- Queries ----------------------------------------------------------------------------------


def terms(raw: str) -> list[str]:
    """The distinct words of a query worth looking for, lower-cased, in order. Everything but
    letters and digits is a separator, so no input can change the database query's meaning."""
    found: list[str] = []
    for match in _WORD.finditer(raw[:MAX_QUERY]):
        term = match.group().lower()[:MAX_TERM]
        if term not in found and term not in STOPWORDS:
            found.append(term)
        if len(found) == MAX_TERMS:
            break
    if not found:  # a query of common words only: look for them after all
        found = list(dict.fromkeys(m.group().lower()[:MAX_TERM] for m in _WORD.finditer(raw[:MAX_QUERY])))[:MAX_TERMS]
    return found


def _in(column: str, ids: Sequence[int]) -> tuple[str, list[int]]:
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)


def search(words: list[str], base_ids: Sequence[int], document_ids: Sequence[int] = (), limit: int = 10) -> list[int]:
    """Ids of the best-matching chunks in these bases (and documents, when given), best first."""
    if not words or not base_ids:
        return []
    where, params = _in("c.base_id", base_ids)
    if document_ids:
        more, extra = _in("c.document_id", document_ids)
        where, params = f"{where} AND {more}", params + extra
    if connection.vendor == "sqlite":
        match = " OR ".join(f'"{w}"' for w in words)
        rows = fetch_rows(
            "SELECT c.id FROM knowledge_chunk_fts f JOIN knowledge_chunk c ON c.id = f.rowid "
            f"WHERE knowledge_chunk_fts MATCH %s AND {where} "
            "ORDER BY bm25(knowledge_chunk_fts, 1.0, 2.0), c.id LIMIT %s",
            [match, *params, limit],
        )
    elif connection.vendor == "postgresql":
        query = "to_tsquery('english'::regconfig, %s)"
        rows = fetch_rows(
            f"SELECT c.id FROM knowledge_chunk c WHERE c.{PG_COLUMN} @@ {query} AND {where} "
            f"ORDER BY ts_rank_cd(c.{PG_COLUMN}, {query}) DESC, c.id LIMIT %s",
            [" | ".join(f"'{w}'" for w in words), *params, " | ".join(f"'{w}'" for w in words), limit],
        )
    else:
        return _fallback(words, base_ids, document_ids, limit)
    return [row[0] for row in rows]


def _fallback(words: list[str], base_ids: Sequence[int], document_ids: Sequence[int], limit: int) -> list[int]:
    from django.db.models import Q

    from .models import Chunk

    match = Q()
    for word in words:
        match |= Q(text__icontains=word) | Q(heading__icontains=word)
    found = Chunk.objects.filter(match, base_id__in=base_ids)
    if document_ids:
        found = found.filter(document_id__in=document_ids)
    return list(found.order_by("id").values_list("id", flat=True)[:limit])
