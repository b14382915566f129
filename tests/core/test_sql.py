"""Names for hand-written SQL, read from the models (core/sql.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from chat.models import PendingMessage, Turn
from core.sql import column, table


def test_names_come_from_the_models_quoted_for_the_database() -> None:
    quote = connection.ops.quote_name
    assert table(Turn) == quote(Turn._meta.db_table)
    assert column(PendingMessage, "chat") == quote("chat_id")  # a foreign key's column
    assert column(Turn, "id") == quote("id")


def test_a_reverse_relation_has_no_column() -> None:
    with pytest.raises(AssertionError):
        column(Turn, "messages")
