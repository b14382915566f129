"""The lexical index: an FTS5 table and its triggers on SQLite, a GIN expression index on
PostgreSQL (knowledge/lexical.py holds the SQL, shared with the repair run after migrate)."""

from django.db import migrations


def forwards(apps, schema_editor):
    from knowledge import lexical

    lexical.install(schema_editor.connection)


def backwards(apps, schema_editor):
    from knowledge import lexical

    lexical.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
