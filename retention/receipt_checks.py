"""The bounded check of a receipt chain (docs/receipts.md "Verifying on every request"): a signed
checkpoint on the chain head, a rotating window of SWEEP_WINDOW receipts below it and at most
APPEND_CAP new ones above it per request; and the whole-chain checks the daily job and
`verify_receipts` run."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.utils import timezone

from core.timestamps import iso
from memoryapp import metrics
from retention.models import DeletionReceipt, ReceiptChain
from retention.receipt_keys import public_keys
from retention.receipts import (
    ZERO_HASH,
    _head_break,
    checkpoint_valid,
    head_anchors,
    save_checkpoint,
    verify_chain,
    walk,
)

# --- the verified checkpoint and the bounded check ---------------------------------------------------
#: Receipts of the verified prefix the endpoint re-checks per request, from `sweep_seq` on: a
#: request costs at most this many receipts plus those appended since the last check, and every
#: receipt is re-checked once per ceil(prefix / SWEEP_WINDOW) requests (what a receipt costs:
#: docs/benchmarks.md "Receipt chain").
SWEEP_WINDOW = 500
# Receipts appended since the checkpoint that one verify request checks at most: a
# burst of forgets between two requests is checked over several, the rest reported as not
# verified yet; the command and the daily job check every receipt.
APPEND_CAP = 2000
NOT_VERIFIED_NOTE = (
    "Receipts after verifiedThroughSeq were not verified by this request (at most {cap} new receipts are "
    "checked per request); later requests go on from there, the daily receipt_chain_check job and "
    "`manage.py verify_receipts` check every receipt."
)


def _in_order(workspace_ref: int, first: int, last: int | None = None):
    receipts = DeletionReceipt.objects.filter(workspace_ref=workspace_ref, chain_seq__gte=first)
    if last is not None:
        receipts = receipts.filter(chain_seq__lte=last)
    return receipts.order_by("chain_seq", "id").iterator(chunk_size=500)


def _stored_hash(workspace_ref: int, seq: int) -> str:
    """The stored hash of the receipt at `seq` (0: the chain's start), checked by an earlier request."""
    if seq == 0:
        return ZERO_HASH
    return (
        DeletionReceipt.objects.filter(workspace_ref=workspace_ref, chain_seq=seq)
        .values_list("sha256", flat=True)
        .first()
        or ZERO_HASH
    )


def unproven_count(workspace_ref: int) -> int:
    """Receipts of the workspace whose result no record proves: only receipts sealed before
    records existed (proof format 1) can be such, and a partial index finds those."""
    return DeletionReceipt.objects.filter(workspace_ref=workspace_ref, proof_format=1, verifications=[]).count()


def verify_chain_bounded(
    workspace_ref: int, *, window: int | None = None, keys: dict[str, Ed25519PublicKey] | None = None
) -> dict[str, Any]:
    """The verify endpoint's check, bounded per request (docs/receipts.md): from the signed
    checkpoint, the receipts appended since (each request moves the checkpoint up to what it
    found intact, so they are checked once), plus a window of `window` receipts of the verified
    prefix from `sweep_seq` (rotating, so repeated requests re-check the whole prefix). A break
    the window finds lowers the checkpoint below it, so it is reported from then on. A chain no
    longer than the window is checked whole at every request, like `verify_chain`. Receipts
    outside this request's window were checked by an earlier one: `verify_receipts` and the daily
    job check every receipt."""
    window = window or SWEEP_WINDOW
    keys = keys if keys is not None else public_keys()
    head = ReceiptChain.objects.filter(workspace_ref=workspace_ref).first()
    if head is None:  # no chain head (a workspace without receipts, or a removed row): the newest only
        return {**verify_chain(workspace_ref, keys=keys, newest=window), "mode": "newest"}
    anchors, anchor_break = head_anchors(head, keys)
    valid = checkpoint_valid(head, keys) and head.verified_seq <= head.seq
    verified = head.verified_seq if valid else 0
    verified_hash = head.verified_hash if valid else ZERO_HASH
    checked, first_break = 0, None
    sweep_from, sweep_to, next_sweep = None, None, 1
    if verified:
        sweep_from = head.sweep_seq if 1 <= head.sweep_seq <= verified else 1
        sweep_to = min(verified, sweep_from + window - 1)
        # the receipt before the window is its anchor: its hash and signature are checked, its link is not
        swept = walk(
            _in_order(workspace_ref, max(1, sweep_from - 1), sweep_to),
            previous=ZERO_HASH,
            expected=1,
            keys=keys,
            anchored=sweep_from > 1,
            anchors=anchors,
        )
        checked += swept.checked
        if swept.first_break is not None or swept.last_seq < sweep_to:
            # the prefix is intact only up to the receipt before the break (or the gap)
            verified = swept.last_seq if swept.first_break is None else swept.first_break["chainSeq"] - 1
            verified_hash = swept.last_hash if swept.last_seq == verified else _stored_hash(workspace_ref, verified)
        else:
            next_sweep = sweep_to + 1 if sweep_to < verified else 1
    cap = APPEND_CAP
    newer = walk(
        _in_order(workspace_ref, verified + 1, verified + cap),
        previous=verified_hash,
        expected=verified + 1,
        keys=keys,
        anchors=anchors,
    )
    checked += newer.checked
    # stopped by the cap, not by the chain's end: what lies beyond is unverified, not missing
    capped = newer.first_break is None and newer.last_seq == verified + cap and head.seq > newer.last_seq
    first_break = (
        newer.first_break or anchor_break or (None if capped else _head_break(head, newer.last_seq, newer.last_hash))
    )
    if first_break is not None:
        metrics.verification_failed("chain", first_break["reason"])
    if not valid or (newer.last_seq, newer.last_hash, next_sweep) != (
        head.verified_seq,
        head.verified_hash,
        head.sweep_seq,
    ):
        save_checkpoint(head.pk, rev=head.checkpoint_rev, seq=newer.last_seq, sha256=newer.last_hash, sweep=next_sweep)
    report = {
        "workspaceId": str(workspace_ref),
        "intact": first_break is None,
        "receipts": head.seq,
        "checked": checked,
        "headSeq": head.seq,
        "firstBreak": first_break,
        "unprovenVerifications": unproven_count(workspace_ref),
        "mode": "bounded",
        "verifiedThroughSeq": newer.last_seq,
        "complete": not capped,
        "notVerifiedBeyondSeq": newer.last_seq if capped else None,
        "note": NOT_VERIFIED_NOTE.format(cap=cap) if capped else None,
        "sweptSeqs": [sweep_from, sweep_to] if sweep_from is not None else None,
        "lastFullCheckAt": iso(head.full_check_at) if head.full_check_at else None,
    }
    return report


def chained_workspaces() -> list[int]:
    refs = set(DeletionReceipt.objects.values_list("workspace_ref", flat=True).distinct())
    refs.update(ReceiptChain.objects.values_list("workspace_ref", flat=True))
    return sorted(refs)


def verify_chains(workspace_refs: Iterable[int] | None = None) -> dict[str, Any]:
    keys = public_keys()
    reports = [
        verify_chain(ref, keys=keys) for ref in (workspace_refs if workspace_refs is not None else chained_workspaces())
    ]
    return {
        "checkedAt": iso(timezone.now()),
        "intact": all(report["intact"] for report in reports),
        "keyIds": list(keys),
        "workspaces": reports,
    }


def check_all_chains() -> dict[str, Any]:
    """Daily job: every workspace's chain checked from its first receipt (and its checkpoint
    rewritten), so a receipt changed below the verify endpoint's checkpoint is reported within a
    day even if nobody runs `verify_receipts`. Counts only."""
    report = verify_chains()
    broken = [chain["workspaceId"] for chain in report["workspaces"] if not chain["intact"]]
    return {
        "workspaces": len(report["workspaces"]),
        "receipts": sum(chain["checked"] for chain in report["workspaces"]),
        "broken": len(broken),
        "brokenWorkspaceIds": broken,
    }


def member_view(report: dict[str, Any], member_id: int) -> dict[str, Any]:
    """What a member sees of the workspace's chain: whether it is intact (their receipts are only
    as trustworthy as the chain), how many receipts are theirs, and where it breaks only when the
    break is one of their own receipts (never another member's receipt id, nor the total)."""
    own = DeletionReceipt.objects.filter(workspace_ref=int(report["workspaceId"]), member_ref=member_id)
    brk = report["firstBreak"]
    if brk is not None:
        mine = brk["receiptId"] is not None and own.filter(pk=int(brk["receiptId"])).exists()
        brk = (
            {**brk, "own": True}
            if mine
            else {"receiptId": None, "chainSeq": None, "reason": brk["reason"], "own": False}
        )
    body = {
        "workspaceId": report["workspaceId"],
        "scope": "member",
        "intact": report["intact"],
        "receipts": own.count(),
        "firstBreak": brk,
    }
    if "complete" in report:  # the bounded check: whether it reached the head (positions are not the member's to see)
        body.update(complete=report["complete"], note=report["note"])
    return body
