from django.db import migrations


def add_demo(apps, schema_editor):  # type: ignore[no-untyped-def]
    LLMModel = apps.get_model("chat", "LLMModel")
    if not LLMModel.objects.filter(model="demo/tessera").exists():
        LLMModel.objects.create(name="Demo (offline)", model="demo/tessera", enabled=True, is_default=False)


class Migration(migrations.Migration):
    dependencies = [("chat", "0001_initial")]
    operations = [migrations.RunPython(add_demo, migrations.RunPython.noop)]
