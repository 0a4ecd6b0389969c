"""Receipts name no words of the member's (issue 33 row 2, docs/receipts.md "Names in receipts"):
the plain namespace and key that forgets by key wrote into `manifest.filters` become keyed
digests under the membership's name key (`retention.receipt_names`; a membership that has ended
gets a key used once and dropped: nobody can resolve those).

The receipts were hashed and signed with the plain names, and are never re-signed: their
`sha256`, signature, the next receipt's link and their verification records stay as they are.
A receipt whose fields still hash to its `sha256` gets a redaction record, signed with the current
key (as 0004 sealed and 0013 anchored what they found), binding the hash its fields have now to
the one it was signed with; one that was already broken is redacted without a record and keeps
reporting `hash_mismatch`. Not reversible in content (the plain names are gone); reversing drops
the field only."""

from django.db import migrations, models

from retention import receipt_names
from retention.receipt_keys import signing_key
from retention.receipts import digest_of, redact


def seal_names(apps, schema_editor):
    DeletionReceipt = apps.get_model("retention", "DeletionReceipt")
    Member = apps.get_model("governance", "Member")
    named = DeletionReceipt.objects.filter(
        models.Q(manifest__filters__has_key="namespace") | models.Q(manifest__filters__has_key="key")
    )
    signer, keys = None, {}
    for receipt in named.order_by("pk").iterator(chunk_size=500):
        filters = receipt.manifest.get("filters") if isinstance(receipt.manifest, dict) else None
        if not receipt_names.has_names(filters):
            continue
        holder = (receipt.workspace_ref, receipt.member_ref)
        if holder not in keys:
            period = (
                1
                if receipt.member_ref is None
                else Member.objects.filter(
                    pk=receipt.member_ref, workspace_id=receipt.workspace_ref, left_at__isnull=True
                )
                .values_list("period", flat=True)
                .first()
            )
            keys[holder] = (
                None
                if period is None
                else receipt_names.stored_key(receipt_names.name_key_id(*holder, period), create=True)
            )
        manifest = {**receipt.manifest, "filters": receipt_names.seal_filters(filters, key=keys[holder])}
        if receipt.sha256 and receipt.redaction is None and digest_of(receipt).hex() == receipt.sha256:
            signer = signer or signing_key()
            redact(receipt, manifest, signer)
        else:
            receipt.manifest = manifest  # broken (or never sealed) before: stays reported as it was
        receipt.save(update_fields=["manifest", "redaction"])


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0014_receipt_residual_until"),
        ("governance", "0004_member_period"),
    ]

    operations = [
        migrations.AddField(
            model_name="deletionreceipt",
            name="redaction",
            field=models.JSONField(
                blank=True,
                default=None,
                help_text="Set when the receipt's names were sealed after it was signed: the hash its fields have "
                "now, signed.",
                null=True,
            ),
        ),
        migrations.RunPython(seal_names, migrations.RunPython.noop),
    ]
