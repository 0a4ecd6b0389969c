"""The chain head anchors every re-verified receipt's records (docs/receipts.md "Verification
records"): for each workspace, the map chain position -> [record count, newest record hash] of the
receipts that have a record written after them, built from the records stored now and signed with
the current key (like 0004 sealed the receipts of its time); every head is signed, an empty map
included, so clearing one is reported. Receipt hashes and records are unchanged (no proof format
change). Reversing drops the fields."""

from django.db import migrations, models

from retention.receipt_keys import signing_key
from retention.receipts import RECEIPT_TRIGGER, signed_anchors


def anchor_existing(apps, schema_editor):
    DeletionReceipt = apps.get_model("retention", "DeletionReceipt")
    ReceiptChain = apps.get_model("retention", "ReceiptChain")
    key = None
    for head in ReceiptChain.objects.order_by("workspace_ref").iterator(chunk_size=500):
        anchors = {}
        stored = (
            DeletionReceipt.objects.filter(workspace_ref=head.workspace_ref)
            .order_by("chain_seq")
            .values_list("chain_seq", "verifications")
        )
        for chain_seq, records in stored.iterator(chunk_size=500):
            records = records if isinstance(records, list) else []
            if any(not isinstance(r, dict) or r.get("trigger") != RECEIPT_TRIGGER for r in records) and isinstance(
                records[-1], dict
            ):
                anchors[str(chain_seq)] = [len(records), records[-1].get("sha256")]
        key = key or signing_key()
        ReceiptChain.objects.filter(pk=head.pk).update(**signed_anchors(head.workspace_ref, anchors, key))


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0012_credits_move_out"),
    ]

    operations = [
        migrations.AddField(
            model_name="receiptchain",
            name="anchors_key_id",
            field=models.CharField(blank=True, db_default="", max_length=32),
        ),
        migrations.AddField(
            model_name="receiptchain",
            name="anchors_signature",
            field=models.CharField(blank=True, db_default="", max_length=128),
        ),
        migrations.AddField(
            model_name="receiptchain",
            name="verification_anchors",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(anchor_existing, migrations.RunPython.noop),
    ]
