"""Run chats were told apart by their title ("Run · name · when"): they get the mark
(`Chat.automated`) and lose the prefix, which the run badge now says."""

from __future__ import annotations

from typing import Any

from django.db import migrations

PREFIX = "Run · "


def mark(apps: Any, schema_editor: Any) -> None:
    Chat = apps.get_model("chat", "Chat")
    AutomationRun = apps.get_model("automations", "AutomationRun")
    ids = AutomationRun.objects.exclude(chat=None).values_list("chat_id", flat=True)
    Chat.objects.filter(pk__in=ids).update(automated=True)
    for chat in Chat.objects.filter(pk__in=ids, title__startswith=PREFIX).only("pk", "title"):
        Chat.objects.filter(pk=chat.pk).update(title=chat.title[len(PREFIX) :])


class Migration(migrations.Migration):
    dependencies = [
        ("automations", "0001_initial"),
        ("chat", "0020_chat_automated"),
    ]

    operations = [migrations.RunPython(mark, migrations.RunPython.noop)]
