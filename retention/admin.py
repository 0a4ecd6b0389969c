"""Receipts, usage and credits in the admin console: read-only records (SPEC §10).

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
from governance.content import content_fields
from retention.erasure import reverify_receipt
from retention.models import (
    Consolidation,
    CreditAccount,
    DeletionReceipt,
    LedgerEntry,
    MemberQuota,
    ModelPrice,
    RoleQuota,
    UsageRecord,
    UsageRollup,
)


def _json(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def reverify(modeladmin, request, receipt: DeletionReceipt, reason: str) -> None:
    reverify_receipt(receipt, actor=request.user, reason=reason)


@admin.register(DeletionReceipt)
class DeletionReceiptAdmin(GovernedAdmin):
    list_display = ("id", "operation", "workspace_display", "member_ref", "actor_label", "versions", "citations", "embeddings", "requested_at", "unreachable_at", "purged_at", "clean")
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
        ("citations", lambda r: r.manifest.get("artifacts", {}).get("citation", 0)),
        ("embeddings", lambda r: r.manifest.get("artifacts", {}).get("memory_embedding", 0)),
        ("filters", lambda r: json.dumps(r.manifest.get("filters", {}), sort_keys=True, ensure_ascii=False)),
        ("requested_at", "requested_at"),
        ("unreachable_at", "unreachable_at"),
        ("purged_at", "purged_at"),
        ("residual_until", lambda r: (r.residual or {}).get("backups", {}).get("until")),
        ("verified_at", lambda r: (r.verification or {}).get("checkedAt")),
        ("clean", lambda r: (r.verification or {}).get("clean")),
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
        return int(obj.manifest.get("artifacts", {}).get("citation", 0))

    @admin.display(description="embeddings")
    def embeddings(self, obj: DeletionReceipt) -> int:
        return int(obj.manifest.get("artifacts", {}).get("memory_embedding", 0))

    @admin.display(description="verified clean", boolean=True)
    def clean(self, obj: DeletionReceipt) -> bool | None:
        return (obj.verification or {}).get("clean")

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

    @admin.display(description="verification")
    def verification_display(self, obj: DeletionReceipt) -> str:
        return _json(obj.verification)

    @admin.display(description="sealed verification records")
    def verifications_display(self, obj: DeletionReceipt) -> str:
        return _json(obj.verifications)


@admin.register(UsageRecord)
class UsageRecordAdmin(GovernedAdmin):
    list_display = (
        "id",
        "created_at",
        "workspace",
        "member_display",
        "role",
        "category",
        "model_name",
        "input_tokens",
        "output_tokens",
        "memory_tokens",
        "input_cost",
        "output_cost",
        "status",
        "settled_at",
    )
    list_select_related = ("workspace", "member__user")
    list_filter = ("workspace", ("member__user", admin.RelatedOnlyFieldListFilter), "category", "status", ("created_at", admin.DateFieldListFilter))
    search_fields = ("#id", "=conversation_id", "=model_name", "member__user__email")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    fields = readonly_fields = (
        "id",
        "workspace",
        "member",
        "role",
        "category",
        "model_name",
        "conversation_id",
        "input_tokens",
        "output_tokens",
        "memory_tokens",
        "input_cost",
        "output_cost",
        "status",
        "created_at",
        "settled_at",
    )
    csv_columns = (
        ("id", "pk"),
        ("created_at", "created_at"),
        ("workspace_id", "workspace_id"),
        ("member_id", "member_id"),
        ("role", "role"),
        ("category", "category"),
        ("model_name", "model_name"),
        ("conversation_id", "conversation_id"),
        ("input_tokens", "input_tokens"),
        ("output_tokens", "output_tokens"),
        ("memory_tokens", "memory_tokens"),
        ("input_cost", "input_cost"),
        ("output_cost", "output_cost"),
        ("status", "status"),
        ("settled_at", "settled_at"),
    )

    @admin.display(description="member", ordering="member__user__email")
    def member_display(self, obj: UsageRecord) -> str:
        if obj.member is None:
            return "—"
        return f"#{obj.member_id} {obj.member.user.email or obj.member.user.username}"


# --- credits (SPEC §9): balances, quotas and the ledger are written only by retention.credits ---
@admin.register(CreditAccount)
class CreditAccountAdmin(GovernedAdmin):
    list_display = ("workspace", "balance", "discrepancy", "reconciled_at", "updated_at")
    list_select_related = ("workspace",)
    list_filter = (("reconciled_at", admin.DateFieldListFilter),)
    search_fields = ("#workspace__id", "workspace__name")
    ordering = ("workspace_id",)


@admin.register(LedgerEntry)
class LedgerEntryAdmin(GovernedAdmin):
    list_display = ("id", "created_at", "workspace", "kind", "amount", "usage_record_id", "member_ref", "actor_label", "note")
    list_select_related = ("workspace",)
    list_filter = ("workspace", "kind", "actor_label", ("created_at", admin.DateFieldListFilter))
    search_fields = ("#id", "#usage_record__id", "#member_ref", "note")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    csv_columns = (
        ("id", "pk"),
        ("created_at", "created_at"),
        ("workspace_id", "workspace_id"),
        ("kind", "kind"),
        ("amount", "amount"),
        ("usage_record_id", "usage_record_id"),
        ("member_id", "member_ref"),
        ("actor", "actor_label"),
        ("note", "note"),
    )


@admin.register(MemberQuota)
class MemberQuotaAdmin(GovernedAdmin):
    list_display = ("member", "workspace", "limit", "used", "period", "period_start", "updated_at")
    list_select_related = ("member__workspace",)
    list_filter = ("period",)
    search_fields = ("#member__id", "member__user__email")
    ordering = ("-id",)

    @admin.display(description="workspace")
    def workspace(self, obj: MemberQuota) -> str:
        return str(obj.member.workspace)


@admin.register(RoleQuota)
class RoleQuotaAdmin(GovernedAdmin):
    list_display = ("workspace", "role", "limit", "used", "period", "period_start", "updated_at")
    list_select_related = ("workspace",)
    list_filter = ("workspace", "role", "period")
    search_fields = ("#workspace__id",)
    ordering = ("workspace_id", "role")


@admin.register(ModelPrice)
class ModelPriceAdmin(GovernedAdmin):
    list_display = ("model_name", "input_per_1k", "output_per_1k", "updated_at")
    search_fields = ("model_name",)
    ordering = ("model_name",)


@admin.register(UsageRollup)
class UsageRollupAdmin(GovernedAdmin):
    list_display = ("day", "workspace", "member_ref", "role", "category", "records", "input_tokens", "output_tokens", "memory_tokens", "input_cost", "output_cost", "computed_at")
    list_select_related = ("workspace",)
    list_filter = ("workspace", "category", "role", ("day", admin.DateFieldListFilter))
    search_fields = ("#member_ref",)
    date_hierarchy = "day"
    ordering = ("-day", "workspace_id")


@admin.register(Consolidation)
class ConsolidationAdmin(GovernedAdmin):
    """`messages` (the consolidation input) is conversation content: never shown here."""

    list_display = ("id", "created_at", "workspace", "member_id", "agent", "status", "reason", "message_count", "model_name", "memories_found", "memories_stored", "finished_at", "input_purged_at")
    list_select_related = ("workspace", "agent")
    list_filter = ("workspace", "status", "reason", ("created_at", admin.DateFieldListFilter))
    search_fields = ("#id", "#member__id", "=conversation_id")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    fields = readonly_fields = (
        "id",
        "workspace",
        "member",
        "agent",
        "credential_ref",
        "conversation_id",
        "anonymous",
        "status",
        "reason",
        "message_count",
        "model_name",
        "memories_found",
        "memories_stored",
        "memory_ids",
        "usage_record",
        "created_at",
        "finished_at",
        "input_purged_at",
    )

    def get_queryset(self, request):
        return super().get_queryset(request).defer(*content_fields(Consolidation))
