"""The keyring sweep (SPEC §8.2): the data store and the key store converge, both ways.

The two are different databases, so no transaction spans them (retention.erasure, "the order").
What a crash, or a key store that failed at the wrong moment, can leave behind:

1. **Orphaned keys**: a data key whose row is gone (an erase whose key deletion failed, a remember
   rolled back after its key was stored) or whose consolidation input was purged. Destroyed here,
   once older than `KEY_GRACE` (a younger key may belong to a row whose INSERT has not committed yet).
2. **Orphaned ciphertext**: a memory version whose key is gone (an erase that destroyed the keys
   and crashed before its rows were deleted). Unreadable, so read as erased already; erased here
   with a receipt of its own (operation `key_sweep`) that says the keys were destroyed before. A
   consolidation input whose key is gone is purged.
3. **Name keys of ended memberships** (`retention.receipt_names`): destroyed at the removal's
   commit; whatever a lost commit hook left is destroyed here.
4. **Receipts not clean for keys**: an erase whose key deletion failed wrote `keysDestroyed: 0`
   and a verification that is not clean; once step 1 has destroyed the keys, the receipt is
   re-verified (a new sealed record, `retention.erasure.reverify_receipt`).

Every step is chunked and idempotent, and safe with two runs at once (the erase locks its rows;
deleting a key twice deletes it once). Counted in /metrics (`gam_keyring_sweep_total`).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any
from uuid import UUID

from django.utils import timezone

from core.chunks import CHUNK
from credits.models import Consolidation
from memoryapp import metrics
from memoryapp.keyring import KEY_GRACE, key_store
from memoryapp.models import MemoryVersion
from memoryapp.sealing import owner_labels
from retention import receipt_names
from retention.erasure import DATA_KEY_ARTIFACT, erase_memories, reverify_receipt
from retention.models import DeletionReceipt, Operation

SWEEP_ACTOR = "system: keyring sweep"
__all__ = ["KEY_GRACE", "sweep_keyring"]  # KEY_GRACE (memoryapp.keyring): keys younger are never orphans


def destroy_orphaned_keys(now: datetime, chunk: int = CHUNK) -> int:
    store = key_store()
    destroyed = 0
    for model, alive in ((MemoryVersion, {}), (Consolidation, {"messages__isnull": False})):
        for owner in owner_labels(model):
            after: UUID | None = None
            while True:
                ids = store.scan(owner=owner, created_before=now - KEY_GRACE, after=after, limit=chunk)
                if not ids:
                    break
                kept = set(model._base_manager.filter(key_id__in=ids, **alive).values_list("key_id", flat=True))
                orphans = [key_id for key_id in ids if key_id not in kept]
                if orphans:
                    destroyed += store.delete_many(orphans)
                after = ids[-1]
                if len(ids) < chunk:
                    break
    return destroyed


def erase_orphaned_ciphertext(chunk: int = CHUNK) -> dict[str, int]:
    """Versions whose key is gone: erased with a receipt per (workspace, member) and chunk.
    Consolidation inputs whose key is gone: purged."""
    store = key_store()
    erased = receipts = 0
    last = 0
    while True:
        rows = list(
            MemoryVersion.objects.filter(pk__gt=last, key_id__isnull=False)
            .order_by("pk")
            .values_list("pk", "key_id", "workspace_id", "member_id")[:chunk]
        )
        if not rows:
            break
        present = store.present([key_id for _, key_id, _, _ in rows])
        lost: dict[tuple[int, int], list[int]] = defaultdict(list)
        for pk, key_id, workspace_id, member_id in rows:
            if key_id not in present:
                lost[(workspace_id, member_id)].append(pk)
        for (workspace_id, member_id), ids in lost.items():
            receipt = erase_memories(
                ids,
                operation=Operation.KEY_SWEEP,
                workspace_id=workspace_id,
                member_id=member_id,
                actor_label=SWEEP_ACTOR,
                filters={"reason": "data key already destroyed (an interrupted erase)"},
            )
            if receipt is not None:
                receipts += 1
                erased += receipt.versions_erased
        last = rows[-1][0]
        if len(rows) < chunk:
            break
    purged = 0
    last = 0
    while True:
        rows = list(
            Consolidation.objects.filter(pk__gt=last, key_id__isnull=False, messages__isnull=False)
            .order_by("pk")
            .values_list("pk", "key_id")[:chunk]
        )
        if not rows:
            break
        present = store.present([key_id for _, key_id in rows])
        lost_ids = [pk for pk, key_id in rows if key_id not in present]
        if lost_ids:
            purged += Consolidation.objects.filter(pk__in=lost_ids).update(
                messages=None, input_purged_at=timezone.now()
            )
        last = rows[-1][0]
        if len(rows) < chunk:
            break
    return {"versionsErased": erased, "receipts": receipts, "consolidationInputsPurged": purged}


def reverify_key_receipts(limit: int = CHUNK) -> int:
    """Re-verify receipts left not clean because data keys remained (their key deletion failed)."""
    done = 0
    for receipt in DeletionReceipt.objects.filter(verification__clean=False).order_by("pk")[:limit]:
        remaining = (receipt.verification or {}).get("remaining", {})
        if not remaining.get(DATA_KEY_ARTIFACT):
            continue
        result = reverify_receipt(
            receipt, actor=None, reason="keyring sweep: the erase's data keys were destroyed late"
        )
        done += 1 if result["clean"] else 0
    return done


def sweep_keyring(now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    orphaned_keys = destroy_orphaned_keys(now)
    ciphertext = erase_orphaned_ciphertext()
    reverified = reverify_key_receipts()
    names = receipt_names.destroy_orphaned()  # name keys of memberships that ended (a lost on-commit destruction)
    metrics.keyring_swept(
        orphaned_keys=orphaned_keys,
        orphaned_versions=ciphertext["versionsErased"],
        orphaned_inputs=ciphertext["consolidationInputsPurged"],
        reverified=reverified,
    )
    return {
        "orphanedKeysDestroyed": orphaned_keys,
        **ciphertext,
        "receiptsReverified": reverified,
        "nameKeysDestroyed": names,
    }
