"""Usage, credits and consolidation records in the admin console: read-only (SPEC §10). Balances,
quotas and the ledger are written only by `credits.charging` and `credits.quotas`."""

from __future__ import annotations

from django.contrib import admin

from credits.models import (
    Consolidation,
    CreditAccount,
    LedgerEntry,
    MemberQuota,
    ModelPrice,
    RoleQuota,
    UsageRecord,
    UsageRollup,
)
from governance.admin_base import GovernedAdmin
from governance.content import content_fields


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
    list_filter = (
        "workspace",
        ("member__user", admin.RelatedOnlyFieldListFilter),
        "category",
        "status",
        ("created_at", admin.DateFieldListFilter),
    )
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


# --- credits (SPEC §9) ---------------------------------------------------------------------------
@admin.register(CreditAccount)
class CreditAccountAdmin(GovernedAdmin):
    list_display = ("workspace", "balance", "discrepancy", "reconciled_at", "updated_at")
    list_select_related = ("workspace",)
    list_filter = (("reconciled_at", admin.DateFieldListFilter),)
    search_fields = ("#workspace__id", "workspace__name")
    ordering = ("workspace_id",)


@admin.register(LedgerEntry)
class LedgerEntryAdmin(GovernedAdmin):
    list_display = (
        "id",
        "created_at",
        "workspace",
        "kind",
        "amount",
        "usage_record_id",
        "member_ref",
        "actor_label",
        "note",
    )
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
    list_display = (
        "day",
        "workspace",
        "member_ref",
        "role",
        "category",
        "records",
        "input_tokens",
        "output_tokens",
        "memory_tokens",
        "input_cost",
        "output_cost",
        "computed_at",
    )
    list_select_related = ("workspace",)
    list_filter = ("workspace", "category", "role", ("day", admin.DateFieldListFilter))
    search_fields = ("#member_ref",)
    date_hierarchy = "day"
    ordering = ("-day", "workspace_id")


@admin.register(Consolidation)
class ConsolidationAdmin(GovernedAdmin):
    """`messages` (the consolidation input) is conversation content: never shown here."""

    list_display = (
        "id",
        "created_at",
        "workspace",
        "member_id",
        "agent",
        "status",
        "reason",
        "message_count",
        "model_name",
        "memories_found",
        "memories_stored",
        "finished_at",
        "input_purged_at",
    )
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
