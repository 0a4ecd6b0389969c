"""A re-review found: a database writer who DELETEs the workspace's chain head row and
truncates a re-verified receipt's records back to its first (shown result rolled back with it)
leaves no trace: with no head, `head_anchors` anchors nothing and `_head_break` checks nothing, and
a receipt holding only the record written with it needs no anchor. Expected: reported."""

from __future__ import annotations

from django.db import transaction

from retention import receipts as chain
from retention.models import DeletionReceipt, ReceiptChain
from tests.receipts.support import forget_some


def test_deleting_the_chain_head_to_hide_a_truncated_reverification_is_reported(world, agent):
    four = forget_some(agent, 4)
    target = DeletionReceipt.objects.get(pk=four[1].pk)
    with transaction.atomic():
        chain.add_verification(
            target,
            {**target.verification, "clean": False, "note": "leftover found"},
            trigger=chain.REVERIFICATION_TRIGGER,
        )
        target.save(update_fields=["verifications", "verification"])
    assert chain.verify_chain(world.workspace.pk)["intact"] is True
    first = target.verifications[:1]
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=first, verification=first[0]["verification"])
    ReceiptChain.objects.filter(workspace_ref=world.workspace.pk).delete()
    assert chain.verify_chain(world.workspace.pk)["intact"] is False
