"""PostgreSQL with pgvector: the vectors' table gets an `embedding vector` column the database
ranks by (knowledge/pgvector.py), filled from the stored vectors. Nothing changes elsewhere;
a server that gets pgvector later runs `manage.py knowledge_pgvector`."""

from typing import Any

from django.db import migrations


def forwards(apps: Any, schema_editor: Any) -> None:
    from knowledge import pgvector

    pgvector.install(schema_editor.connection)


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("ALTER TABLE knowledge_chunkvector DROP COLUMN IF EXISTS embedding")


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_mcp_refresh")]

    operations = [migrations.RunPython(forwards, backwards)]
