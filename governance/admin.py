"""Governance in the admin console (SPEC §10): workspaces, members, credentials, settings and
the audit log; accounts (users, groups, the login) are `admin_accounts`, the knowledge base
`admin_knowledge`, both registered by importing them here.

Everything is read-only except two paths: a platform admin with `add_workspace` may create a
workspace (through `actions.create_workspace`, so its settings row, owner and audit event exist)
and rename it. Platform flags, history retention, credential revocation and member erasure are
governed actions (reason page, the same action function the API uses, an audit event).
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.db.models.signals import post_migrate
from django.urls import reverse
from django.utils.html import format_html

from governance import actions, admin_accounts, admin_knowledge  # noqa: F401  (the two register their admins)
from governance.admin_base import GovernedAdmin, Summary, governed_action
from governance.admin_filters import ActiveMemberFilter, CredentialStatusFilter, WorkspaceRefFilter
from governance.admin_roles import ERASE_MEMBER_MEMORIES, REVOKE_CREDENTIAL, SET_PLATFORM_FLAGS, sync_after_migrate
from governance.models import (
    AskHistorySettings,
    AuditEvent,
    Credential,
    Member,
    PersonalToken,
    Workspace,
)
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from retention import previews

post_migrate.connect(sync_after_migrate, dispatch_uid="governance.sync_staff_groups")


def count_of(queryset: QuerySet, field: str = "workspace") -> Subquery:
    """A correlated COUNT(*) subquery: one figure per row without a join fan-out."""
    counted = queryset.filter(**{field: OuterRef("pk")}).order_by().values(field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def changelist_link(model_label: str, text: object, **params: object) -> str:
    url = reverse(f"admin:{model_label.replace('.', '_')}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(params), text)


def _active_credentials() -> QuerySet[Credential]:
    return Credential.objects.active()


# --- workspaces ------------------------------------------------------------------------------
class WorkspaceCreationForm(forms.ModelForm):
    owner_email = forms.EmailField(help_text="The first owner; an account is created if none exists.")

    class Meta:
        model = Workspace
        fields = ("name", "owner_email", "ai_memory_available", "retains_history")


def _memory_counts(queryset: QuerySet[Workspace]) -> list[Summary]:
    """The confirmation's counts, one annotated query whatever the selection (a full erase plan per
    workspace would load every version id). The receipts then also count the access-log
    references the erase strikes, and a version already waiting for a cascade gets that cause's
    receipt."""
    lines = []
    for workspace in queryset.annotate(
        versions=count_of(MemoryVersion.objects.all()),
        citations=count_of(Citation.objects.all(), "memory__workspace"),
        embeddings=count_of(MemoryEmbedding.objects.all(), "memory__workspace"),
    )[:200]:
        lines.append(
            Summary(
                f"{workspace}: memory versions / citations / embeddings to erase",
                f"{workspace.versions} / {workspace.citations} / {workspace.embeddings}",
            )
        )
    return lines


def _set_flag(flag: bool):
    def perform(modeladmin, request, workspace: Workspace, reason: str) -> None:
        actions.set_ai_memory_available(workspace, flag, actor=request.user, reason=reason)

    perform.__name__ = "enable_ai_memory" if flag else "disable_ai_memory"
    return perform


def make_non_retaining(modeladmin, request, workspace: Workspace, reason: str) -> None:
    actions.set_retains_history(workspace, False, actor=request.user, reason=reason)


def resume_retaining(modeladmin, request, workspace: Workspace, reason: str) -> None:
    actions.set_retains_history(workspace, True, actor=request.user, reason=reason)


@admin.register(Workspace)
class WorkspaceAdmin(GovernedAdmin):
    list_display = (
        "id",
        "name",
        "ai_memory_available",
        "retains_history",
        "agent_memories",
        "retention_days",
        "members_link",
        "credentials_link",
        "memories_link",
        "created_at",
    )
    list_display_links = ("id", "name")
    list_select_related = ("ask_history",)
    list_filter = (
        "ai_memory_available",
        "retains_history",
        "ask_history__agent_memories_enabled",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("#id", "name")
    ordering = ("id",)
    readonly_fields = ("ai_memory_available", "retains_history", "created_at", "settings_summary")
    actions = [
        governed_action(
            description="Switch the platform AI-memory flag ON",
            permission=SET_PLATFORM_FLAGS,
            perform=_set_flag(True),
            done="Platform flag switched on for {count} workspace(s).",
        ),
        governed_action(
            description="Switch the platform AI-memory flag OFF",
            permission=SET_PLATFORM_FLAGS,
            perform=_set_flag(False),
            done="Platform flag switched off for {count} workspace(s).",
        ),
        governed_action(
            description="Make non-retaining (erases every memory, with receipts)",
            permission=SET_PLATFORM_FLAGS,
            perform=make_non_retaining,
            summary=_memory_counts,
            warning="Every memory of these workspaces becomes unreachable now and is erased with a deletion receipt; "
            "this cannot be undone.",
            done="{count} workspace(s) made non-retaining; their memories are being erased (see Deletion receipts).",
        ),
        governed_action(
            description="Resume keeping history",
            permission=SET_PLATFORM_FLAGS,
            perform=resume_retaining,
            done="{count} workspace(s) keep history again.",
        ),
    ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                active_members=count_of(Member.objects.active()),
                active_credentials=count_of(_active_credentials()),
            )
        )

    def has_add_permission(self, request, *args) -> bool:
        return request.user.has_perm("governance.add_workspace")

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("governance.change_workspace")

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = WorkspaceCreationForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "owner_email", "ai_memory_available", "retains_history"]
        return ["name", "ai_memory_available", "retains_history", "created_at", "settings_summary"]

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def save_model(self, request, obj: Workspace, form, change: bool) -> None:
        if not change:
            workspace, _owner = actions.create_workspace(
                obj.name,
                owner_email=form.cleaned_data["owner_email"],
                ai_memory_available=obj.ai_memory_available,
                retains_history=obj.retains_history,
                actor=request.user,
            )
            obj.pk, obj.created_at = workspace.pk, workspace.created_at
            obj._state.adding, obj._state.db = False, workspace._state.db
            return
        actions.rename_workspace(obj, obj.name, actor=request.user)

    @admin.display(description="agent memories", boolean=True, ordering="ask_history__agent_memories_enabled")
    def agent_memories(self, obj: Workspace) -> bool | None:
        ask_history = getattr(obj, "ask_history", None)
        return ask_history.agent_memories_enabled if ask_history else None

    @admin.display(description="retention days", ordering="ask_history__agent_memory_retention_days")
    def retention_days(self, obj: Workspace):
        ask_history = getattr(obj, "ask_history", None)
        return ask_history.agent_memory_retention_days if ask_history else "—"

    @admin.display(description="active members", ordering="active_members")
    def members_link(self, obj: Workspace) -> str:
        return changelist_link("governance.member", obj.active_members, workspace__id__exact=obj.pk, active="yes")

    @admin.display(description="active credentials", ordering="active_credentials")
    def credentials_link(self, obj: Workspace) -> str:
        return changelist_link(
            "governance.credential", obj.active_credentials, workspace__id__exact=obj.pk, status="active"
        )

    @admin.display(description="memories")
    def memories_link(self, obj: Workspace) -> str:
        return changelist_link("memoryapp.memoryversion", "versions", workspace__id__exact=obj.pk)

    @admin.display(description="ask-history settings")
    def settings_summary(self, obj: Workspace) -> str:
        ask_history = AskHistorySettings.objects.filter(workspace=obj).first()
        if ask_history is None:
            return "—"
        return format_html(
            "Agent memories {} · retention {} days · expired grace {} days",
            "on" if ask_history.agent_memories_enabled else "off",
            ask_history.agent_memory_retention_days,
            ask_history.expired_grace_days,
        )


@admin.register(AskHistorySettings)
class AskHistorySettingsAdmin(GovernedAdmin):
    list_display = (
        "workspace",
        "agent_memories_enabled",
        "agent_memory_retention_days",
        "expired_grace_days",
        "updated_at",
    )
    list_select_related = ("workspace",)
    list_filter = ("agent_memories_enabled",)
    search_fields = ("#workspace__id", "workspace__name")
    ordering = ("workspace_id",)


# --- members ---------------------------------------------------------------------------------
ARTIFACT_LABELS = {
    "memory_version": "memory versions",
    "citation": "citation rows",
    "memory_embedding": "embeddings",
    "access_log_entry": "access-log entries",
    "access_log_reference": "access-log references struck",
}


def _member_erase_manifests(request, queryset: QuerySet[Member]) -> list[Summary]:
    """The confirmation page: each member's erase manifest, as the receipt will carry it
    (counts only), and an audit event per member that it was shown."""
    lines = []
    for member in queryset.select_related("user", "workspace")[:200]:
        manifest = previews.preview_member_erase(member, actor=request.user)
        who = f"{member.user.email or member.user.username} — {member}"
        lines.append(Summary(f"{who}: memory versions to erase", manifest["artifacts"]["memory_version"]))
        lines.append(
            Summary(
                f"{who}: memories (current versions), of which assistant memories",
                f"{manifest['memories']} / {manifest.get('assistantMemories', 0)}",
            )
        )
        for artifact, label in ARTIFACT_LABELS.items():
            if artifact != "memory_version":
                lines.append(Summary(f"{who}: {label}", manifest["artifacts"][artifact]))
    return lines


def erase_member_memories(modeladmin, request, member: Member, reason: str) -> None:
    previews.erase_member_memories(member, actor=request.user, reason=reason)


@admin.register(Member)
class MemberAdmin(GovernedAdmin):
    list_display = (
        "id",
        "email",
        "workspace",
        "role",
        "remember_me",
        "is_active",
        "joined_at",
        "left_at",
        "memories_link",
    )
    list_select_related = ("user", "workspace")
    list_filter = ("workspace", "role", ActiveMemberFilter, "remember_me")
    search_fields = ("#id", "user__email", "user__username")
    ordering = ("-id",)
    actions = [
        governed_action(
            description="Erase all memories of the member (with a receipt)",
            permission=ERASE_MEMBER_MEMORIES,
            perform=erase_member_memories,
            preview=_member_erase_manifests,
            warning="Every memory version of these members is erased now, with a deletion receipt; this cannot be "
            "undone.",
            done="Memories of {count} member(s) erased (see Deletion receipts).",
        )
    ]

    @admin.display(description="user", ordering="user__email")
    def email(self, obj: Member) -> str:
        return obj.user.email or obj.user.username

    @admin.display(description="active", boolean=True)
    def is_active(self, obj: Member) -> bool:
        return obj.is_active

    @admin.display(description="memories")
    def memories_link(self, obj: Member) -> str:
        return changelist_link("memoryapp.memoryversion", "versions", member__id__exact=obj.pk)


# --- credentials -----------------------------------------------------------------------------
def revoke_credential(modeladmin, request, credential: Credential, reason: str) -> None:
    actions.revoke_credential(credential, actor=request.user, reason=reason)


@admin.register(Credential)
class CredentialAdmin(GovernedAdmin):
    list_display = (
        "id",
        "name",
        "prefix_display",
        "workspace",
        "member_email",
        "scopes",
        "status",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    list_select_related = ("workspace", "member__user", "context_set")
    list_filter = ("workspace", CredentialStatusFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("#id", "name", "^prefix", "member__user__email")
    ordering = ("-id",)
    exclude = ("token_hash",)
    readonly_fields = (
        "workspace",
        "member",
        "name",
        "scopes",
        "context_set",
        "prefix_display",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    fields = readonly_fields
    csv_columns = (
        ("id", "pk"),
        ("workspace_id", "workspace_id"),
        ("member_id", "member_id"),
        ("name", "name"),
        ("prefix", "prefix"),
        ("scopes", lambda c: " ".join(c.scopes)),
        ("context_set_id", "context_set_id"),
        ("created_at", "created_at"),
        ("last_used_at", "last_used_at"),
        ("expires_at", "expires_at"),
        ("revoked_at", "revoked_at"),
    )
    actions = [
        governed_action(
            description="Revoke the selected credentials",
            permission=REVOKE_CREDENTIAL,
            perform=revoke_credential,
            done="{count} credential(s) revoked.",
        )
    ]

    @admin.display(description="token", ordering="prefix")
    def prefix_display(self, obj: Credential) -> str:
        return f"{obj.prefix}…"

    @admin.display(description="member", ordering="member__user__email")
    def member_email(self, obj: Credential) -> str:
        return obj.member.user.email or obj.member.user.username

    @admin.display(description="status")
    def status(self, obj: Credential) -> str:
        return obj.status().value


@admin.register(PersonalToken)
class PersonalTokenAdmin(GovernedAdmin):
    list_display = ("id", "user", "prefix_display", "created_at", "last_used_at", "revoked_at")
    list_select_related = ("user",)
    search_fields = ("^prefix", "user__email")
    ordering = ("-id",)
    fields = readonly_fields = ("user", "prefix_display", "created_at", "last_used_at", "revoked_at")

    @admin.display(description="token", ordering="prefix")
    def prefix_display(self, obj: PersonalToken) -> str:
        return f"{obj.prefix}…"


# --- audit log -------------------------------------------------------------------------------
@admin.register(AuditEvent)
class AuditEventAdmin(GovernedAdmin):
    list_display = ("created_at", "action", "workspace_display", "actor_label", "target", "changes_display", "reason")
    list_filter = (WorkspaceRefFilter, "actor_label", "action", ("created_at", admin.DateFieldListFilter))
    search_fields = ("#id", "action", "target", "actor_label", "reason")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    fields = readonly_fields = (
        "created_at",
        "action",
        "workspace_ref",
        "workspace",
        "actor",
        "actor_label",
        "target",
        "changes_display",
        "reason",
    )
    csv_columns = (
        ("id", "pk"),
        ("created_at", "created_at"),
        ("workspace_id", "workspace_ref"),
        ("actor_id", "actor_id"),
        ("actor", "actor_label"),
        ("action", "action"),
        ("target", "target"),
        ("changes", lambda e: json.dumps(e.changes, sort_keys=True, ensure_ascii=False)),
        ("reason", "reason"),
    )

    @admin.display(description="workspace", ordering="workspace_ref")
    def workspace_display(self, obj: AuditEvent) -> str:
        return f"#{obj.workspace_ref}" if obj.workspace_ref else "—"

    @admin.display(description="changes")
    def changes_display(self, obj: AuditEvent) -> str:
        return json.dumps(obj.changes, sort_keys=True, ensure_ascii=False) if obj.changes else ""
