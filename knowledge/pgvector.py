"""Passages' vectors searched inside PostgreSQL, where the server has the pgvector extension.

The vectors stay rows of `knowledge_chunkvector` (knowledge/vectors.py); on such a server that
table also gets an `embedding vector` column, filled as the rows are written, and a search is
one query that ranks by cosine distance in the database: no process reads a base's vectors into
memory. The column is not a model field, so nothing changes where there is no pgvector (SQLite,
or a PostgreSQL without it: numpy scores the rows there), and deleting a passage, document or
base, or emptying the table, takes its `embedding` with the row.

The search is exact (a scan of the searched bases' rows, by their `(base, space)` index). No
approximate (HNSW) index is built: it would rank the whole table and filter by base afterwards,
returning fewer passages than asked for when the searched bases are a small part of it.

`install` adds the extension and the column and fills it from the stored vectors; migration
0006 runs it, and `manage.py knowledge_pgvector` does for a server that gets pgvector later
(restart Tessera's processes after it: each looks for the column once).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import DatabaseError, connection, transaction

TABLE = "knowledge_chunkvector"
FILL_BATCH = 500


def literal(values: Any) -> str:
    """A vector as pgvector reads it from text: `[0.1,0.2,…]` (float32 values, repr-exact)."""
    return "[" + ",".join(repr(float(v)) for v in np.asarray(values, dtype="<f4")) + "]"


@functools.cache
def available() -> bool:
    """Whether this database searches vectors itself (checked once per process)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        return _has_column(cursor)


def _has_column(cursor: Any) -> bool:
    cursor.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s AND column_name = 'embedding'",
        [TABLE],
    )
    return cursor.fetchone() is not None


def install(conn: Any = connection) -> str:
    """Adds the extension and the column where the server offers pgvector, and fills the column
    from the stored vectors. Returns what happened, for people."""
    if conn.vendor != "postgresql":
        return "Not PostgreSQL: vectors are scored in each process."
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return "This PostgreSQL server has no pgvector: vectors are scored in each process."
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        if cursor.fetchone() is None:
            try:
                with transaction.atomic(using=conn.alias), conn.cursor() as inner:
                    inner.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except DatabaseError as exc:  # no right to create extensions: a superuser must
                return (
                    f"pgvector is offered but could not be enabled ({exc}); "
                    "a superuser can run CREATE EXTENSION vector, then manage.py knowledge_pgvector."
                )
        if not _has_column(cursor):
            cursor.execute(f"ALTER TABLE {TABLE} ADD COLUMN embedding vector")
        filled, last = 0, 0
        while True:
            cursor.execute(
                f"SELECT id, vector FROM {TABLE} WHERE embedding IS NULL AND id > %s ORDER BY id LIMIT %s",
                [last, FILL_BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                break
            last = rows[-1][0]
            # A torn row (no whole float32 values) is left without: it never matched in numpy either.
            whole = [(row_id, bytes(data)) for row_id, data in rows if data and len(data) % 4 == 0]
            _fill(cursor, "id", [(row_id, np.frombuffer(data, dtype="<f4")) for row_id, data in whole])
            filled += len(whole)
    available.cache_clear()
    return f"pgvector searches the passages' vectors in the database ({filled} vector(s) filled in)."


def _fill(cursor: Any, column: str, rows: Sequence[tuple[int, Any]]) -> None:
    """Sets `embedding` of the rows whose `column` (id or chunk_id) is each pair's number, where
    it is not set yet (a passage that has a vector keeps it, as in knowledge.vectors.write)."""
    for start in range(0, len(rows), FILL_BATCH):
        part = rows[start : start + FILL_BATCH]
        params: list[Any] = []
        for key, vector in part:
            params += [key, literal(vector)]
        cursor.execute(
            f"UPDATE {TABLE} AS t SET embedding = v.e FROM (VALUES {','.join(['(%s, %s::vector)'] * len(part))}) "
            f"AS v(key, e) WHERE t.{column} = v.key AND t.embedding IS NULL",
            params,
        )


def fill_chunks(chunk_ids: Sequence[int], vectors: Sequence[Any]) -> None:
    """Sets the column of the rows just written for these passages (knowledge.vectors.write)."""
    with connection.cursor() as cursor:
        _fill(cursor, "chunk_id", list(zip(chunk_ids, vectors, strict=True)))


def search(target: Any, base_ids: Sequence[int], space: str, document_ids: Sequence[int], limit: int) -> list[int]:
    """Ids of the passages nearest `target` (a unit vector), best first, as knowledge.vectors
    ranks them: cosine above zero (distance below one), ties by id; vectors of another size
    (another model's) never compare."""
    query = literal(target)
    where = "base_id = ANY(%s) AND space = %s AND embedding IS NOT NULL"
    params: list[Any] = [list(base_ids), space]
    if document_ids:
        where += " AND document_id = ANY(%s)"
        params.append(sorted(set(document_ids)))
    # The distance only of rows of the query's size (the CASE: a condition pushed into the WHERE
    # may be evaluated before the size check, and vectors of two sizes do not compare).
    sql = (
        f"SELECT chunk_id FROM (SELECT chunk_id, CASE WHEN vector_dims(embedding) = %s "
        f"THEN embedding <=> %s::vector END AS distance FROM {TABLE} WHERE {where}) AS near "
        "WHERE distance < 1 ORDER BY distance, chunk_id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [len(target), query, *params, limit])
        return [int(row[0]) for row in cursor.fetchall()]
