"""List filters of the admin console that Django does not ship."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone

from governance.models import Workspace


class WorkspaceRefFilter(admin.SimpleListFilter):
    """Receipts and audit events keep a plain `workspace_ref` (they outlive their workspace).
    Lists the existing workspaces; `?workspace=<id>` also works for a deleted one."""

    title = "workspace"
    parameter_name = "workspace"
    field_name = "workspace_ref"
    max_choices = 200

    def lookups(self, request, model_admin):
        return [
            (str(pk), f"{name} (#{pk})")
            for pk, name in Workspace.objects.order_by("name", "pk").values_list("pk", "name")[: self.max_choices]
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if not value.isdigit():
            return queryset.none()
        return queryset.filter(**{self.field_name: int(value)})


class ActiveMemberFilter(admin.SimpleListFilter):
    title = "membership"
    parameter_name = "active"

    def lookups(self, request, model_admin):
        return [("yes", "Active"), ("no", "Removed")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.active()
        if self.value() == "no":
            return queryset.removed()
        return queryset


class CredentialStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("revoked", "Revoked"), ("expired", "Expired")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "active":
            return queryset.active(now)
        if self.value() == "revoked":
            return queryset.revoked()
        if self.value() == "expired":
            return queryset.expired(now)
        return queryset


class MemorySurfaceFilter(admin.SimpleListFilter):
    """Agent memories (every namespace but `assistant`) or assistant memories."""

    title = "surface"
    parameter_name = "surface"

    def lookups(self, request, model_admin):
        return [("agent", "Agent memories"), ("assistant", "Assistant memories")]

    def queryset(self, request, queryset):
        if self.value() == "agent":
            return queryset.agent()
        if self.value() == "assistant":
            return queryset.assistant()
        return queryset


class CurrentVersionFilter(admin.SimpleListFilter):
    title = "version"
    parameter_name = "current"

    def lookups(self, request, model_admin):
        return [("yes", "Current"), ("no", "Superseded")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.current()
        if self.value() == "no":
            return queryset.superseded()
        return queryset


class UnreachableFilter(admin.SimpleListFilter):
    title = "unreachable"
    parameter_name = "unreachable"

    def lookups(self, request, model_admin):
        return [("yes", "Unreachable, waiting for erasure"), ("no", "Reachable")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.unreachable()
        if self.value() == "no":
            return queryset.reachable()
        return queryset


def last_days_query(field: str, days: int) -> dict[str, str]:
    """Query-string parameters of a "the last N days" link on a DateTimeField, in the form
    DateFieldListFilter itself uses (aware midnights)."""
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    return {f"{field}__gte": str(today - timedelta(days=days - 1)), f"{field}__lt": str(today + timedelta(days=1))}
