"""API tokens now belong to `hub` (hub/migrations/0001): only the state forgets the model here;
its table and rows stay, read by `hub.ApiToken`."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("toolsets", "0007_groups"),
        ("hub", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")],
            database_operations=[],
        ),
    ]
