"""One receipt per (workspace, chain position): a fork of a chain cannot be stored. After 0004
has given every existing receipt its position."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0004_seal_existing_receipts"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="deletionreceipt",
            constraint=models.UniqueConstraint(
                fields=("workspace_ref", "chain_seq"), name="one_receipt_per_chain_position"
            ),
        ),
    ]
