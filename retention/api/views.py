"""Deletion receipts and the lifecycle matrix (SPEC §5, §8). Owners see every receipt of the
workspace with counts only; a member sees the receipts of their own memories. Both see each
receipt's proof (position, hash, previous hash, key id, signature: content-free), the chain's
verification, and anyone may fetch the public keys that verify it (docs/receipts.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.utils import translation
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.api.base import WorkspaceAPIView
from governance.models import AskHistorySettings, AuditEvent
from memoryapp.cursors import decode_cursor, encode_cursor
from memoryapp.errors import validation_error
from memoryapp.models import ASSISTANT_NAMESPACE, AccessEntry, Citation, MemoryEmbedding, MemoryState, MemoryVersion, past_retention_q
from memoryapp.params import query_int
from memoryapp.timestamps import iso
from retention import receipts as chain
from retention.matrix import artifact_classes
from retention.models import DeletionReceipt, Operation, UsageRecord

MANAGE = "ask_history:manage"


def _english_label(operation: str) -> str:
    # An API field, not a page: the same words whatever the caller's Accept-Language.
    with translation.override("en"):
        return Operation.label_of(operation)


def receipt_json(receipt: DeletionReceipt, *, own: bool) -> dict[str, Any]:
    """A member sees their own receipts in full. Anyone else allowed to list a receipt (the
    owner) sees counts only: the filters hold what the member wrote or chose (a namespace, a key
    built from what was said, a memory id), so they are left out with the version ids."""
    manifest = receipt.manifest if isinstance(receipt.manifest, dict) else {}
    if not own:
        manifest = {"artifacts": manifest.get("artifacts", {}), "requestedIds": manifest.get("requestedIds")}
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
        "verification": receipt.verification,
    }
    if own:
        data["memoryVersionIds"] = [str(i) for i in receipt.memory_version_ids]
        data["dedupeKey"] = receipt.dedupe_key
        data["salt"] = receipt.salt  # the hashed secret: with it the member recomputes the hash; nobody else may
    data["proof"] = chain.proof_json(receipt)
    return data


class DeletionReceiptsVerifyView(WorkspaceAPIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="Verify the workspace's receipt chain (hashes, links, signatures) and report the first break",
        description=(
            "Owners get the whole chain's report: receipt count, head position and the first break (receipt id, position and reason: "
            "hash_mismatch, broken_link, unknown_key, bad_signature, verification_changed, missing_receipt; verificationSeq when the break is in "
            "one of the receipt's sealed verification records, null for the result shown with it), and how many receipts' results predate "
            "sealed records (unprovenVerifications). Members get whether the chain is intact, how many "
            "receipts are theirs, and the break's receipt id only when it is one of their own receipts."
        ),
    )
    def get(self, request, ws_id):
        report = chain.verify_chains([self.workspace.pk])
        (workspace,) = report["workspaces"]
        if self.member.has_perm(MANAGE):
            body = {**workspace, "scope": "workspace"}
        else:
            body = chain.member_view(workspace, self.member.pk)
        return Response({**body, "checkedAt": report["checkedAt"], "keyIds": report["keyIds"], "publicKeyUrl": chain.PUBLIC_KEY_PATH})


class ReceiptSigningKeyView(APIView):
    """The public keys that verify deletion receipts: the current one and the retired ones still
    accepted (public: a verifier needs no account)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Public Ed25519 keys that verify deletion receipts (docs/receipts.md)")
    def get(self, request: Request):
        return Response(chain.public_keys_json())


class DeletionReceiptsView(WorkspaceAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("operation", str, required=False),
            OpenApiParameter("limit", int, required=False),
            OpenApiParameter("cursor", str, required=False, description="nextCursor of the previous page"),
        ],
        responses={200: OpenApiTypes.OBJECT},
        summary="Deletion receipts: every receipt of the workspace (owner, counts only) or your own",
    )
    def get(self, request, ws_id):
        receipts = DeletionReceipt.objects.filter(workspace_ref=self.workspace.pk).order_by("-id")
        owner = self.member.has_perm(MANAGE)
        if not owner:
            receipts = receipts.filter(member_ref=self.member.pk)
        params = request.query_params
        if params.get("operation"):
            if params["operation"] not in Operation.values:
                raise validation_error({"operation": [f"One of {', '.join(Operation.values)}."]})
            receipts = receipts.filter(operation=params["operation"])
        scope = f"receipts:{self.workspace.pk}:{self.member.pk}"
        if params.get("cursor"):
            receipts = receipts.filter(pk__lt=int(decode_cursor(params["cursor"], scope=scope)))
        limit = query_int(params, "limit", default=20, minimum=1, maximum=100)
        page = list(receipts[: limit + 1])
        more = len(page) > limit
        page = page[:limit]
        return Response(
            {
                "receipts": [receipt_json(r, own=r.member_ref == self.member.pk) for r in page],
                "nextCursor": encode_cursor(page[-1].pk, scope=scope) if more else None,
            }
        )


class LifecycleView(WorkspaceAPIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="Lifecycle matrix of every stored artifact class, with current counts")
    def get(self, request, ws_id):
        ask_history = self.workspace.ask_history
        owner = self.member.has_perm(MANAGE)
        return Response(
            {
                "scope": "workspace" if owner else "member",
                "settings": {
                    **ask_history.api_values(AskHistorySettings.RETENTION_API_FIELDS),
                    "backupRetentionDays": settings.BACKUP_RETENTION_DAYS,
                    "walArchiveRetentionDays": settings.WAL_ARCHIVE_RETENTION_DAYS,
                    "retentionAppliesToExistingMemories": True,
                },
                "artifacts": [a.as_json() for a in artifact_classes()],
                "counts": self.counts(owner),
            }
        )

    def counts(self, owner: bool) -> dict[str, int]:
        """How many of each class exist now: the workspace's (owner) or the member's own."""
        versions = MemoryVersion.objects.filter(workspace=self.workspace)
        receipts = DeletionReceipt.objects.filter(workspace_ref=self.workspace.pk)
        usage = UsageRecord.objects.filter(workspace=self.workspace)
        access = AccessEntry.objects.filter(workspace=self.workspace)
        if not owner:
            versions = versions.filter(member=self.member)
            receipts = receipts.filter(member_ref=self.member.pk)
            usage = usage.filter(member=self.member)
            access = access.filter(member=self.member)
        expired = past_retention_q(self.workspace.ask_history.agent_memory_retention_days)
        summary = versions.aggregate(
            total=Count("pk"),
            pending_erasure=Count("pk", filter=Q(unreachable_at__isnull=False)),
            expired=Count("pk", filter=Q(unreachable_at__isnull=True) & (Q(state=MemoryState.EXPIRED) | expired)),
            assistant=Count("pk", filter=Q(namespace=ASSISTANT_NAMESPACE)),
        )
        counts = {
            "memoryVersions": summary["total"],
            "assistantMemoryVersions": summary["assistant"],
            "expiredAwaitingPurge": summary["expired"],
            "pendingCascadeErasure": summary["pending_erasure"],
            "citations": Citation.objects.filter(memory__in=versions).count(),
            "embeddings": MemoryEmbedding.objects.filter(memory__in=versions).count(),
            "receipts": receipts.count(),
            "usageRecords": usage.count(),
            "accessLogEntries": access.count(),
        }
        if owner:
            counts["auditEvents"] = AuditEvent.objects.filter(workspace_ref=self.workspace.pk).count()
        return counts
