"""Deletion receipts in the admin console: read-only records (SPEC §10).

The one write is the governed "re-run verification" of a receipt, the action
`retention.erasure.reverify_receipt`: it appends the new result as a sealed record to
`receipt.verifications`, shows it in `receipt.verification`, and writes an audit event, in one
transaction.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.utils.html import format_html

from governance.admin_base import GovernedAdmin, governed_action
from governance.admin_filters import WorkspaceRefFilter
from governance.admin_roles import REVERIFY_RECEIPT
from retention.erasure import reverify_receipt
from retention.models import DeletionReceipt


def _json(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def reverify(modeladmin, request, receipt: DeletionReceipt, reason: str) -> None:
    reverify_receipt(receipt, actor=request.user, reason=reason)


@admin.register(DeletionReceipt)
class DeletionReceiptAdmin(GovernedAdmin):
    list_display = (
        "id",
        "operation",
        "workspace_display",
        "member_ref",
        "actor_label",
        "versions",
        "citations",
        "embeddings",
        "requested_at",
        "unreachable_at",
        "purged_at",
        "residual_until",
        "clean",
    )
    list_filter = (WorkspaceRefFilter, "operation", "actor_label", ("purged_at", admin.DateFieldListFilter))
    search_fields = ("#id", "#workspace_ref", "#member_ref", "actor_label")
    date_hierarchy = "purged_at"
    ordering = ("-purged_at", "-id")
    fields = readonly_fields = (
        "id",
        "operation",
        "workspace_ref",
        "member_ref",
        "actor",
        "actor_label",
        "manifest_display",
        "version_ids_display",
        "requested_at",
        "unreachable_at",
        "purged_at",
        "residual_display",
        "residual_until",
        "residual_closed_display",
        "verification_display",
        "dedupe_key",
        "chain_seq",
        "sha256",
        "previous_hash",
        "key_id",
        "signature",
        "proof_format",
        "verifications_display",
    )
    csv_columns = (
        ("id", "pk"),
        ("operation", "operation"),
        ("workspace_id", "workspace_ref"),
        ("member_id", "member_ref"),
        ("actor", "actor_label"),
        ("memory_versions", lambda r: r.versions_erased),
        ("citations", lambda r: r.artifact_count("citation")),
        ("embeddings", lambda r: r.artifact_count("memory_embedding")),
        ("filters", lambda r: json.dumps(r.manifest.get("filters", {}), sort_keys=True, ensure_ascii=False)),
        ("requested_at", "requested_at"),
        ("unreachable_at", "unreachable_at"),
        ("purged_at", "purged_at"),
        ("backups_until", lambda r: r.backups_until),
        ("residual_until", "residual_until"),
        ("residual_closed_at", lambda r: r.residual_closed_at()),
        ("verified_at", lambda r: r.verified_at),
        ("clean", lambda r: r.verified_clean),
    )
    actions = [
        governed_action(
            description="Re-run verification of the selected receipts",
            permission=REVERIFY_RECEIPT,
            perform=reverify,
            done="{count} receipt(s) re-verified.",
        )
    ]

    @admin.display(description="workspace", ordering="workspace_ref")
    def workspace_display(self, obj: DeletionReceipt) -> str:
        return f"#{obj.workspace_ref}"

    @admin.display(description="versions")
    def versions(self, obj: DeletionReceipt) -> int:
        return obj.versions_erased

    @admin.display(description="citations")
    def citations(self, obj: DeletionReceipt) -> int:
        return obj.artifact_count("citation")

    @admin.display(description="embeddings")
    def embeddings(self, obj: DeletionReceipt) -> int:
        return obj.artifact_count("memory_embedding")

    @admin.display(description="verified clean", boolean=True)
    def clean(self, obj: DeletionReceipt) -> bool | None:
        return obj.verified_clean

    @admin.display(description="manifest")
    def manifest_display(self, obj: DeletionReceipt) -> str:
        return _json(obj.manifest)

    @admin.display(description="memory version ids")
    def version_ids_display(self, obj: DeletionReceipt) -> str:
        ids = obj.memory_version_ids or []
        shown = ", ".join(str(i) for i in ids[:100])
        return f"{len(ids)}: {shown}{' …' if len(ids) > 100 else ''}"

    @admin.display(description="residual window")
    def residual_display(self, obj: DeletionReceipt) -> str:
        return _json(obj.residual)

    @admin.display(description="residual window closed")
    def residual_closed_display(self, obj: DeletionReceipt) -> str:
        """When the last KEK that may have wrapped the erased keys was destroyed."""
        closed = obj.residual_closed_at()
        if closed is not None:
            return f"closed at {closed.isoformat()}: no copy of the key store can unwrap the erased keys"
        if obj.residual_until is None:
            return "open, with no instant named (KEK rotation off or run by the operator)"
        return f"open until the KEK is destroyed, scheduled by {obj.residual_until.isoformat()}"

    @admin.display(description="verification")
    def verification_display(self, obj: DeletionReceipt) -> str:
        return _json(obj.verification)

    @admin.display(description="sealed verification records")
    def verifications_display(self, obj: DeletionReceipt) -> str:
        return _json(obj.verifications)
