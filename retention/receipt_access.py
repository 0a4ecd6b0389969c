"""Who sees deletion receipts in what form (SPEC §5, §8): the member their own, the owner every
receipt of the workspace with the salt withheld (which ones: `DeletionReceipt.objects.restrict`),
and the chain report each may read."""

from __future__ import annotations

from typing import Any

from django.utils import timezone, translation

from core.timestamps import iso
from governance.models import Member
from retention.models import RECEIPTS_OF_WORKSPACE, DeletionReceipt, Operation
from retention.receipt_checks import member_view, verify_chain_bounded
from retention.receipt_keys import PUBLIC_KEY_PATH, public_keys
from retention.receipt_names import Resolver
from retention.receipts import proof_json


def chain_report_for(member: Member) -> dict[str, Any]:
    """The workspace chain's verification as `member` may see it: the whole report for an
    owner, `member_view` for anyone else."""
    keys = public_keys()
    workspace = verify_chain_bounded(member.workspace_id, keys=keys)
    body = (
        {**workspace, "scope": "workspace"}
        if member.has_perm(RECEIPTS_OF_WORKSPACE)
        else member_view(workspace, member.pk)
    )
    return {**body, "checkedAt": iso(timezone.now()), "keyIds": list(keys), "publicKeyUrl": PUBLIC_KEY_PATH}


def _english_label(operation: str) -> str:
    # An API field, not a page: the same words whatever the caller's Accept-Language.
    with translation.override("en"):
        return Operation.label_of(operation)


def receipts_json(receipts: list[DeletionReceipt], *, viewer: Member) -> list[dict[str, Any]]:
    """A page of receipts as `viewer` may see them (one name resolver for the page)."""
    resolver = Resolver(viewer)
    return [receipt_json(r, viewer=viewer, resolver=resolver) for r in receipts]


def receipt_json(receipt: DeletionReceipt, *, viewer: Member, resolver: Resolver | None = None) -> dict[str, Any]:
    """A member sees their own receipts in full. Anyone else allowed to list a receipt (the
    owner) sees counts only: the filters hold what the member wrote or chose (a namespace, a key
    built from what was said, a memory id), so they are left out with the version ids. The
    namespace and key are stored as keyed digests (`receipt_names`); the member is also shown
    the names their live memories still use (`resolvedFilters`: computed, never stored)."""
    own = receipt.member_ref == viewer.pk
    manifest = receipt.manifest if isinstance(receipt.manifest, dict) else {}
    if not own:
        manifest = {
            "artifacts": manifest.get("artifacts", {}),
            "requestedIds": manifest.get("requestedIds"),
            "keysDestroyed": manifest.get("keysDestroyed"),
        }  # never the key ids
    data = {
        "id": str(receipt.pk),
        "operation": receipt.operation,
        "operationLabel": _english_label(receipt.operation),
        "actor": receipt.actor_label,
        "memberId": str(receipt.member_ref) if receipt.member_ref is not None else None,
        "manifest": manifest,
        "requestedAt": iso(receipt.requested_at),
        "unreachableAt": iso(receipt.unreachable_at),
        "purgedAt": iso(receipt.purged_at),
        "residual": receipt.residual,
        **receipt.residual_json(),  # residualUntil, residualClosedAt, residualOpen
        "verification": receipt.verification,
    }
    if own:
        data["memoryVersionIds"] = [str(i) for i in receipt.memory_version_ids]
        data["dedupeKey"] = receipt.dedupe_key
        data["salt"] = receipt.salt  # the hashed secret: with it the member recomputes the hash; nobody else may
        data["resolvedFilters"] = (resolver or Resolver(viewer)).resolve(receipt.manifest)
    data["proof"] = proof_json(receipt)
    return data
