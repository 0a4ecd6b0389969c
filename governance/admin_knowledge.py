"""The knowledge base in the admin console (SPEC §10): collections, documents, their versions and
passages, entities, context sets and agents. Not memory: a passage's text may be shown."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count

from governance.admin_base import GovernedAdmin
from governance.models import Agent, Collection, ContextSet, Document, DocumentVersion, Entity, Passage


# --- knowledge (not memory: passage text may be shown) ---------------------------------------
@admin.register(Collection)
class CollectionAdmin(GovernedAdmin):
    list_display = ("id", "name", "workspace", "restricted", "readers_count", "created_at")
    list_select_related = ("workspace",)
    list_filter = ("workspace", "restricted")
    search_fields = ("#id", "name")
    ordering = ("-id",)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(readers_count=Count("readers"))

    @admin.display(description="readers", ordering="readers_count")
    def readers_count(self, obj: Collection) -> int:
        return obj.readers_count


@admin.register(Document)
class DocumentAdmin(GovernedAdmin):
    list_display = ("id", "title", "workspace", "collection", "current_version_number", "expires_at", "created_at")
    list_select_related = ("workspace", "collection", "current_version")
    list_filter = ("workspace",)
    search_fields = ("#id", "title")
    ordering = ("-id",)

    @admin.display(description="current version")
    def current_version_number(self, obj: Document):
        return obj.current_version.number if obj.current_version else "—"


@admin.register(DocumentVersion)
class DocumentVersionAdmin(GovernedAdmin):
    list_display = ("id", "document", "number", "created_at")
    list_select_related = ("document",)
    search_fields = ("#id", "#document__id")
    ordering = ("-id",)


@admin.register(Passage)
class PassageAdmin(GovernedAdmin):
    list_display = ("id", "document", "version", "position", "excerpt", "sha256")
    list_select_related = ("document", "version")
    search_fields = ("#id", "#document__id", "text")
    ordering = ("-id",)

    @admin.display(description="text")
    def excerpt(self, obj: Passage) -> str:
        return obj.text if len(obj.text) <= 120 else obj.text[:119] + "…"


@admin.register(Entity)
class EntityAdmin(GovernedAdmin):
    list_display = ("id", "name", "aliases", "workspace", "created_at")
    list_select_related = ("workspace",)
    list_filter = ("workspace",)
    search_fields = ("#id", "name")
    ordering = ("-id",)
    exclude = ("passages",)


@admin.register(ContextSet)
class ContextSetAdmin(GovernedAdmin):
    list_display = ("id", "name", "workspace", "active", "deleted_at", "created_at")
    list_select_related = ("workspace",)
    list_filter = ("workspace", "active")
    search_fields = ("#id", "name")
    ordering = ("-id",)


@admin.register(Agent)
class AgentAdmin(GovernedAdmin):
    list_display = ("id", "name", "workspace", "vector_memory", "created_at")
    list_select_related = ("workspace",)
    list_filter = ("workspace", "vector_memory")
    search_fields = ("#id", "name")
    ordering = ("-id",)
