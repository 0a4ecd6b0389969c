"""A consolidation's input (its messages) becomes sealed under a data key of its own (SPEC §8.2)."""

from django.db import migrations, models

import memoryapp.sealing


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0010_consolidation_member_period"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="consolidation",
            options={"base_manager_name": "objects", "ordering": ["-created_at", "-id"]},
        ),
        migrations.AddField(
            model_name="consolidation",
            name="key_id",
            field=memoryapp.sealing.RowKeyField(blank=True, editable=False, null=True, unique=True),
        ),
        memoryapp.sealing.SealColumn(
            json=True,
            model_name="consolidation",
            name="messages",
            field=memoryapp.sealing.SealedField(blank=True, codec="json", default=None, null=True),
        ),
        migrations.AlterField(
            model_name="deletionreceipt",
            name="operation",
            field=models.CharField(
                choices=[
                    ("forget", "Forgotten by an agent"),
                    ("member_delete", "Deleted by the member"),
                    ("owner_bulk_delete", "Owner deleted all agent memories"),
                    ("expiry", "Retention expiry"),
                    ("grace_purge", "Expired grace period ended"),
                    ("cascade_document", "Cited document deleted"),
                    ("cascade_collection", "Collection deleted"),
                    ("member_removal", "Member removed"),
                    ("workspace_deletion", "Workspace deleted"),
                    ("non_retaining", "Workspace made non-retaining"),
                    ("admin_erase", "Erased by a platform admin"),
                    ("forgetting_check", "Forgetting check"),
                    ("key_sweep", "Left by an interrupted erase (data key already destroyed)"),
                ],
                db_index=True,
                max_length=32,
            ),
        ),
    ]
