"""API tokens move here from `toolsets` by state only: the model keeps its table
(`toolsets_apitoken`), so no row is copied, and its content type (with the permissions and admin
history hanging off it) is relabelled rather than made anew. `toolsets` 0008 then forgets it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODEL = "apitoken"


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    # A content type already under the new label (only after a partial, hand-run migration)
    # is left alone: relabelling onto it would break the (app_label, model) uniqueness.
    if not ContentType.objects.filter(app_label=new, model=MODEL).exists():
        ContentType.objects.filter(app_label=old, model=MODEL).update(app_label=new)


def to_hub(apps, schema_editor) -> None:
    _relabel(apps, "toolsets", "hub")


def to_toolsets(apps, schema_editor) -> None:
    _relabel(apps, "hub", "toolsets")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("toolsets", "0007_groups"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=100)),
                        ("token_hash", models.CharField(max_length=64, unique=True)),
                        ("hint", models.CharField(help_text="The token's last characters, to recognise it.", max_length=12)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "can_approve",
                            models.BooleanField(
                                default=False,
                                help_text="Calls may run tools whose policy is Ask.",
                                verbose_name="may approve ask tools",
                            ),
                        ),
                        (
                            "may_use_tools",
                            models.BooleanField(default=True, help_text="Calls may run Tessera's tools.", verbose_name="tools"),
                        ),
                        (
                            "may_use_agents",
                            models.BooleanField(default=True, help_text="Calls may run Tessera's agents.", verbose_name="agents"),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "toolsets_apitoken", "ordering": ["-created_at"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(to_hub, to_toolsets),
    ]
