"""Verification results become sealed records (docs/receipts.md "Verifications"). Existing
receipts keep their hash: they get proof format 1 (not hashed, so their canonical form is the one
they were sealed with) and no records; their results stay unproven until re-verified. New
receipts default to format 2."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0006_receipt_salt"),
    ]

    operations = [
        migrations.AddField(
            model_name="deletionreceipt",
            name="proof_format",
            field=models.PositiveSmallIntegerField(
                default=1, help_text="2: its verifications are sealed records; 1: sealed before they were."
            ),
        ),
        migrations.AlterField(
            model_name="deletionreceipt",
            name="proof_format",
            field=models.PositiveSmallIntegerField(
                default=2, help_text="2: its verifications are sealed records; 1: sealed before they were."
            ),
        ),
        migrations.AddField(
            model_name="deletionreceipt",
            name="verifications",
            field=models.JSONField(
                blank=True, default=list, help_text="Every verification result, each hashed, linked and signed."
            ),
        ),
    ]
