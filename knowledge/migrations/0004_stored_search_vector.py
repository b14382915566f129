"""PostgreSQL: the lexical index becomes a stored generated `tsvector` column with its own GIN
index (knowledge/lexical.py), so ranking no longer parses each matching passage again per query.
Nothing changes on SQLite (its FTS5 table already stores what it ranks)."""

from typing import Any

from django.db import migrations


def forwards(apps: Any, schema_editor: Any) -> None:
    from knowledge import lexical

    if schema_editor.connection.vendor == "postgresql":
        lexical.install(schema_editor.connection)


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    from knowledge import lexical

    with schema_editor.connection.cursor() as cursor:
        for sql in lexical.PG_DROP:
            cursor.execute(sql)
        cursor.execute(
            "CREATE INDEX IF NOT EXISTS knowledge_chunk_tsv ON knowledge_chunk USING gin "
            f"(({lexical.PG_VECTOR}))"
        )


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0003_vectors")]

    operations = [migrations.RunPython(forwards, backwards)]
