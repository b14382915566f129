"""What the full-text indexes (chat search, knowledge) share: their set-up SQL run for the
database vendor in use (each keeps its own statements), and raw rows from the default database."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper


def execute_for_vendor(conn: BaseDatabaseWrapper, statements: Mapping[str, Sequence[str]]) -> None:
    """Runs the statements given for `conn`'s vendor (none for a vendor not named)."""
    with conn.cursor() as cursor:
        for sql in statements.get(conn.vendor, ()):
            cursor.execute(sql)


def fetch_rows(sql: str, params: Iterable[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return list(cursor.fetchall())
