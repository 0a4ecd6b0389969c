"""Deletion receipts and the lifecycle matrix (SPEC §5, §8). Owners see every receipt of the
workspace with counts only; a member sees the receipts of their own memories. Both see each
receipt's proof (position, hash, previous hash, key id, signature: content-free), the chain's
verification, and anyone may fetch the public keys that verify it (docs/receipts.md)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.cursors import decode_cursor, encode_cursor
from core.errors import validation_error
from core.params import query_int
from governance.api.base import WorkspaceAPIView
from governance.models import AskHistorySettings
from retention import receipt_access, receipt_keys
from retention.lifecycle import counts_for
from retention.matrix import artifact_classes
from retention.models import DeletionReceipt, Operation


class DeletionReceiptsVerifyView(WorkspaceAPIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="Verify the workspace's receipt chain (hashes, links, signatures) and report the first break",
        description=(
            "Owners get the whole chain's report: receipt count, head position and the first break (receipt id, "
            "position and reason: hash_mismatch, broken_link, unknown_key, bad_signature, verification_changed, "
            "anchor_changed, missing_receipt; verificationSeq when the break is in one of the receipt's sealed "
            "verification records, null for the result shown with it), and how many receipts' results predate sealed "
            "records (unprovenVerifications). Members get whether the chain is intact, how many receipts are theirs, "
            "and the break's receipt id only when it is one of their own receipts. Each request is bounded: it checks "
            "the receipts appended since the last check (at most 2,000; `complete: false` and a note say when more "
            "wait for the next requests) and a rotating window of the earlier ones (verifiedThroughSeq, "
            "notVerifiedBeyondSeq, sweptSeqs, lastFullCheckAt: docs/receipts.md); `manage.py verify_receipts` and the "
            "daily job check every receipt."
        ),
    )
    def get(self, request, ws_id):
        return Response(receipt_access.chain_report_for(self.member))


class ReceiptSigningKeyView(APIView):
    """The public keys that verify deletion receipts: the current one and the retired ones still
    accepted (public: a verifier needs no account)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="Public Ed25519 keys that verify deletion receipts (docs/receipts.md)",
    )
    def get(self, request: Request):
        return Response(receipt_keys.public_keys_json())


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
        receipts = DeletionReceipt.objects.restrict(self.member, "view").order_by("-id")
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
                "receipts": receipt_access.receipts_json(page, viewer=self.member),
                "nextCursor": encode_cursor(page[-1].pk, scope=scope) if more else None,
            }
        )


class LifecycleView(WorkspaceAPIView):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="Lifecycle matrix of every stored artifact class, with current counts",
    )
    def get(self, request, ws_id):
        ask_history = self.workspace.ask_history
        scope, counts = counts_for(self.member)
        return Response(
            {
                "scope": scope,
                "settings": {
                    **ask_history.api_values(AskHistorySettings.RETENTION_API_FIELDS),
                    "backupRetentionDays": settings.BACKUP_RETENTION_DAYS,
                    "walArchiveRetentionDays": settings.WAL_ARCHIVE_RETENTION_DAYS,
                    "retentionAppliesToExistingMemories": True,
                },
                "artifacts": [a.as_json() for a in artifact_classes()],
                "counts": counts,
            }
        )
