"""The memory store in the admin console: metadata only (SPEC §10).

No page, list, export, filter, search or history view reads memory text or `details`: the
querysets defer both columns, no form or list names them, and `GovernedAdmin` refuses any lookup
that reaches them. Versions cannot be edited or deleted here; erasure goes through the governed
member action (or the workspace's non-retaining switch) so that a receipt is written.

`ADMIN_MAY_VIEW_MEMORY_CONTENT` (default off) lets a superuser read one version's content through
an explicit step that asks for a reason and writes an audit event before showing anything.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.db.models.functions import Length
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from governance.admin_base import GovernedAdmin, ReasonForm
from governance.admin_filters import CurrentVersionFilter, MemorySurfaceFilter, UnreachableFilter
from governance.auth import audited_step_allowed
from governance.content import content_fields
from memoryapp.actions import view_content_as_admin
from memoryapp.crypto import OVERHEAD as SEALED_OVERHEAD
from memoryapp.models import AccessEntry, Citation, MemoryEmbedding, MemoryVersion, RateLimitSlot

CONTENT_COLUMNS = tuple(sorted(content_fields(MemoryVersion)))


def may_view_content(user) -> bool:
    return audited_step_allowed(user)


@admin.register(MemoryVersion)
class MemoryVersionAdmin(GovernedAdmin):
    list_display = (
        "id",
        "workspace",
        "member_display",
        "namespace",
        "key",
        "version",
        "source",
        "state",
        "is_current",
        "text_length",
        "digest_short",
        "created_at",
        "retention_anchor",
        "unreachable",
    )
    list_select_related = ("workspace", "member__user")
    list_filter = (
        "workspace",
        MemorySurfaceFilter,
        "source",
        "state",
        CurrentVersionFilter,
        UnreachableFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    # Exact matches only: ids use the primary key, and nothing can reach text or details.
    search_fields = ("#id", "#member__id", "=key", "=namespace")
    numbers_search_ids_only = True
    # -id walks the primary-key index backwards; created_at has no index on a 1M-row table.
    ordering = ("-id",)
    show_facets = admin.ShowFacets.NEVER
    fields = readonly_fields = (
        "id",
        "workspace",
        "member_display",
        "credential_display",
        "source",
        "namespace",
        "key",
        "version",
        "text_length",
        "text_hmac",
        "masked_kinds",
        "has_details",
        "collection_id",
        "citations_display",
        "embedding_display",
        "valid_from",
        "valid_to",
        "created_at",
        "retention_anchor",
        "state",
        "expired_at",
        "unreachable_at",
        "unreachable_reason",
        "content_step",
    )
    csv_columns = (
        ("id", "pk"),
        ("workspace_id", "workspace_id"),
        ("member_id", "member_id"),
        ("credential_id", "credential_id"),
        ("source", "source"),
        ("namespace", "namespace"),
        ("key", "key"),
        ("version", "version"),
        ("text_length", "text_length"),
        ("text_hmac", "text_hmac"),
        ("masked_kinds", lambda v: " ".join(v.masked_kinds or [])),
        ("collection_id", "collection_id"),
        ("valid_from", "valid_from"),
        ("valid_to", "valid_to"),
        ("created_at", "created_at"),
        ("retention_anchor", "retention_anchor"),
        ("state", "state"),
        ("expired_at", "expired_at"),
        ("unreachable_at", "unreachable_at"),
        ("unreachable_reason", "unreachable_reason"),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).defer(*CONTENT_COLUMNS)

    @admin.display(description="member", ordering="member_id")
    def member_display(self, obj: MemoryVersion) -> str:
        return f"#{obj.member_id} {obj.member.user.email or obj.member.user.username}"

    @admin.display(description="credential")
    def credential_display(self, obj: MemoryVersion) -> str:
        if obj.credential_id is None:
            return "—"
        prefix = obj.credential.prefix if obj.credential else ""
        return f"#{obj.credential_id} ({prefix}…)"

    @admin.display(description="current", boolean=True)
    def is_current(self, obj: MemoryVersion) -> bool:
        return obj.is_current

    @admin.display(description="unreachable", boolean=True)
    def unreachable(self, obj: MemoryVersion) -> bool:
        return obj.unreachable_at is not None

    @admin.display(description="keyed digest")
    def digest_short(self, obj: MemoryVersion) -> str:
        # HMAC under a key derived from the version's data key (crypto.DataKeyCipher.digest), never a
        # plain hash: it dies with the key when the version is erased.
        return obj.text_hmac[:12]

    @admin.display(description="details", boolean=True)
    def has_details(self, obj: MemoryVersion) -> bool:
        # `details` is content, sealed: only whether there are any, from the ciphertext's length
        # (an empty value seals to the bare overhead), never decrypting it.
        sealed = Q(key_id__isnull=False, details_bytes__gt=SEALED_OVERHEAD) | Q(
            key_id__isnull=True, details_bytes__gt=0
        )
        return MemoryVersion.objects.filter(pk=obj.pk).annotate(details_bytes=Length("details")).filter(sealed).exists()

    @admin.display(description="citations")
    def citations_display(self, obj: MemoryVersion) -> str:
        rows = (
            Citation.objects.filter(memory_id=obj.pk)
            .order_by("position")
            .values_list("position", "passage_id", "document_id", "document_version_id", "sha256")
        )
        if not rows:
            return "—"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>#{}: passage {} · document {} v{} · sha-256 {}</li>",
                ((p, pa, d, dv, h[:12]) for p, pa, d, dv, h in rows),
            ),
        )

    @admin.display(description="embedding")
    def embedding_display(self, obj: MemoryVersion) -> str:
        row = MemoryEmbedding.objects.filter(memory_id=obj.pk).values_list("embedder_id", "dim").first()
        return f"{row[0]} ({row[1]} dimensions)" if row else "—"

    @admin.display(description="content")
    def content_step(self, obj: MemoryVersion) -> str:
        if not settings.ADMIN_MAY_VIEW_MEMORY_CONTENT:
            return "Memory content is not shown in the admin (ADMIN_MAY_VIEW_MEMORY_CONTENT is off)."
        url = reverse("admin:memoryapp_memoryversion_content", args=[obj.pk])
        return format_html(
            '<a class="button" href="{}">View content…</a> (superusers only; asks for a reason and is audited)', url
        )

    # -- the audited "view content" step
    def get_urls(self):
        return [
            path(
                "<int:object_id>/content/",
                self.admin_site.admin_view(self.content_view),
                name="memoryapp_memoryversion_content",
            ),
            *super().get_urls(),
        ]

    def content_view(self, request, object_id: int):
        if not may_view_content(request.user):
            raise PermissionDenied
        version = MemoryVersion.objects.select_related("workspace").filter(pk=object_id).defer(*CONTENT_COLUMNS).first()
        if version is None:
            raise Http404
        form = ReasonForm(request.POST if request.method == "POST" else None)
        content = None
        if request.method == "POST" and form.is_valid():
            content = view_content_as_admin(version, actor=request.user, reason=form.cleaned_data["reason"])
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": f"Content of {version}",
            "opts": opts,
            "app_label": opts.app_label,
            "original": version,
            "form": form,
            "content": content,
        }
        response = TemplateResponse(request, "admin/memoryapp/memoryversion/content.html", context)
        response["Cache-Control"] = "no-store"
        return response


@admin.register(Citation)
class CitationAdmin(GovernedAdmin):
    list_display = ("id", "memory_id", "position", "passage_id", "document_id", "document_version_id", "sha256")
    search_fields = ("#memory__id", "#passage_id", "#document_id")
    ordering = ("-id",)
    show_facets = admin.ShowFacets.NEVER
    fields = readonly_fields = ("memory_id", "position", "passage_id", "document_id", "document_version_id", "sha256")


@admin.register(MemoryEmbedding)
class MemoryEmbeddingAdmin(GovernedAdmin):
    list_display = ("memory_id", "embedder_id", "dim")
    search_fields = ("#memory__id", "=embedder_id")
    ordering = ("-memory_id",)
    show_facets = admin.ShowFacets.NEVER
    fields = readonly_fields = ("memory_id", "embedder_id", "dim")

    def get_queryset(self, request):
        return super().get_queryset(request).defer(*content_fields(MemoryEmbedding))


@admin.register(RateLimitSlot)
class RateLimitSlotAdmin(GovernedAdmin):
    list_display = ("id", "credential_id", "at")
    search_fields = ("#credential_id",)
    ordering = ("-id",)
    fields = readonly_fields = ("credential_id", "at")


@admin.register(AccessEntry)
class AccessEntryAdmin(GovernedAdmin):
    """Metadata of the access log: when, which credential id, operation, surface and counts.
    Never the credential's name (the member wrote it) and never which memories."""

    list_display = (
        "id",
        "at",
        "workspace_id",
        "member_id",
        "credential_ref",
        "operation",
        "surface",
        "returned",
        "hidden",
        "erased",
    )
    list_filter = ("operation", "surface", ("at", admin.DateFieldListFilter))
    search_fields = ("#id", "#workspace__id", "#member__id", "#credential_ref")
    numbers_search_ids_only = True
    ordering = ("-id",)
    show_facets = admin.ShowFacets.NEVER
    fields = readonly_fields = (
        "id",
        "at",
        "workspace_id",
        "member_id",
        "credential_ref",
        "operation",
        "surface",
        "returned",
        "hidden",
        "erased",
        "listed",
    )
    csv_columns = (
        ("id", "pk"),
        ("at", "at"),
        ("workspace_id", "workspace_id"),
        ("member_id", "member_id"),
        ("credential_id", "credential_ref"),
        ("operation", "operation"),
        ("surface", "surface"),
        ("returned", "returned"),
        ("hidden", "hidden"),
        ("erased_since", "erased"),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).defer(*content_fields(AccessEntry))

    @admin.display(description="memories still listed")
    def listed(self, obj: AccessEntry) -> int:
        return len(obj.memories or [])
