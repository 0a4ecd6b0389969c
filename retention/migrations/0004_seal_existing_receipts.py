"""Seal the receipts written before receipts were chained: per workspace, in the order they were
written (id), each linked to the one before it and signed with the current key. Reversing clears
the chain fields."""

from django.db import migrations

from retention.receipt_keys import signing_key
from retention.receipts import ZERO_HASH, seal


def seal_existing(apps, schema_editor):
    DeletionReceipt = apps.get_model("retention", "DeletionReceipt")
    ReceiptChain = apps.get_model("retention", "ReceiptChain")
    key = None
    workspaces = DeletionReceipt.objects.order_by().values_list("workspace_ref", flat=True).distinct()
    for workspace_ref in sorted(set(workspaces)):
        previous, seq, last = ZERO_HASH, 0, None
        for receipt in (
            DeletionReceipt.objects.filter(workspace_ref=workspace_ref).order_by("id").iterator(chunk_size=500)
        ):
            key = key or signing_key()
            seq += 1
            receipt.chain_seq, receipt.previous_hash = seq, previous
            seal(receipt, key)
            receipt.save(update_fields=["chain_seq", "previous_hash", "sha256", "key_id", "signature"])
            previous, last = receipt.sha256, receipt.pk
        ReceiptChain.objects.update_or_create(
            workspace_ref=workspace_ref, defaults={"seq": seq, "head_hash": previous, "head_receipt_ref": last}
        )


def unseal(apps, schema_editor):
    apps.get_model("retention", "DeletionReceipt").objects.update(
        chain_seq=0, previous_hash="", sha256="", key_id="", signature=""
    )
    apps.get_model("retention", "ReceiptChain").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0003_receipt_chain"),
    ]

    operations = [
        migrations.RunPython(seal_existing, unseal),
    ]
