"""Receipts gain their hash chain fields and the per-workspace chain head (docs/receipts.md).
0004 seals the receipts already stored; 0005 then makes one receipt per chain position a rule."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0002_credits_quotas_ledger_consolidation"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ReceiptChain",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("workspace_ref", models.BigIntegerField(unique=True)),
                (
                    "seq",
                    models.PositiveBigIntegerField(default=0, help_text="Position of the last receipt (0: none yet)."),
                ),
                (
                    "head_hash",
                    models.CharField(
                        default="0000000000000000000000000000000000000000000000000000000000000000", max_length=64
                    ),
                ),
                ("head_receipt_ref", models.BigIntegerField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.AddField(
            model_name="deletionreceipt",
            name="chain_seq",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="deletionreceipt",
            name="key_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(
            model_name="deletionreceipt",
            name="previous_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="deletionreceipt",
            name="sha256",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="deletionreceipt",
            name="signature",
            field=models.CharField(blank=True, default="", max_length=128),
        ),
    ]
