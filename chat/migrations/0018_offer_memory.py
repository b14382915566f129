"""The Memory toolset is new: a user's next new chat offers it, as a brand-new user's first chat
does (chat.selection.default_selection). Their other choices stay as they were."""

from typing import Any

from django.db import migrations

MEMORY_TOOLS = ["save_memory", "update_memory", "forget_memory", "list_memories"]


def offer_memory(apps: Any, schema_editor: Any) -> None:
    defaults = apps.get_model("chat", "UserChatDefaults")
    for row in defaults.objects.all():
        if isinstance(row.enabled_tools, dict) and "memory" not in row.enabled_tools:
            row.enabled_tools = {**row.enabled_tools, "memory": list(MEMORY_TOOLS)}
            row.save(update_fields=["enabled_tools"])


class Migration(migrations.Migration):
    dependencies = [("chat", "0017_agentdefinition_knowledge_bases"), ("memory", "0001_initial")]

    operations = [migrations.RunPython(offer_memory, migrations.RunPython.noop)]
