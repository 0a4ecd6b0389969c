"""`RememberHit` is named for what it counts: `RateLimitSlot` (issue 23 step 6). The table keeps
its name (`db_table`), so the rename changes no schema: the AlterModelTable pins the name the
table already has, and the RenameModel then moves the model state (and its content type)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0007_keyed_text_digest"),
    ]

    operations = [
        migrations.AlterModelTable(name="rememberhit", table="memoryapp_rememberhit"),
        migrations.RenameModel(old_name="RememberHit", new_name="RateLimitSlot"),
    ]
