"""The rate-limit slots' table takes the model's name (issue 35): `memoryapp_rememberhit` becomes
`memoryapp_ratelimitslot`, and its two indexes say "slot" too. On both backends a table rename is
a catalogue change (`ALTER TABLE … RENAME TO`), not a copy, and the table holds at most one window
(an hour) of short rows; SQLite, which cannot rename an index, rebuilds the two indexes. Like every
migration it runs before the new processes start (docs/operations.md, "Production deployment")."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memoryapp", "0013_kek_records"),
    ]

    operations = [
        migrations.AlterModelTable(name="ratelimitslot", table=None),
        migrations.RenameIndex(
            model_name="ratelimitslot", new_name="memoryapp_slot_cred_bucket", old_name="memoryapp_hit_cred_bucket_at"
        ),
        migrations.RenameIndex(
            model_name="ratelimitslot",
            new_name="memoryapp_slot_member_bucket",
            old_name="memoryapp_hit_member_bucket_at",
        ),
    ]
