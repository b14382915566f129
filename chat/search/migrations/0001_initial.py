"""The search index: FTS5 tables and their triggers on SQLite, GIN expression indexes on
PostgreSQL (chat/search/backends.py holds the SQL, shared with the repair run after migrate)."""

from django.db import migrations


def forwards(apps, schema_editor):
    from chat.search import backends

    backends.install(schema_editor.connection)


def backwards(apps, schema_editor):
    from chat.search import backends

    backends.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0006_subagents"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
