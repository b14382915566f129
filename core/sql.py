"""Names for a hand-written SQL statement, read from the models: a few statements on hot paths
are plain SQL because the ORM cost more to build them than the database to run them
(chat/worker/owner_facts.py, chat/pending.py). Reading the names from the models keeps them
right for a custom user model or a renamed table."""

from __future__ import annotations

from django.db import connection
from django.db.models import Field, Model


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[Model], field: str) -> str:
    found = model._meta.get_field(field)
    assert isinstance(found, Field) and found.column  # a concrete column, not a reverse relation
    return connection.ops.quote_name(found.column)
