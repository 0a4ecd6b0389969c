"""A receipt states residualUntil (issue 33): when the last KEK that may have wrapped its erased keys is destroyed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0013_receipt_verification_anchors"),
    ]

    operations = [
        migrations.AddField(
            model_name="deletionreceipt",
            name="residual_until",
            field=models.DateTimeField(
                blank=True,
                db_index=True,
                help_text="When the last key-encryption key that may have wrapped the erased keys is destroyed "
                "(residual.kek.until): from then on no copy can be read. Null: rotation off or "
                "operator-run.",
                null=True,
            ),
        ),
    ]
