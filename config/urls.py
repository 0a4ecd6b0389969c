from django.contrib import admin
from django.urls import include, path, re_path, register_converter
from django.utils import translation
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.params import IdConverter
from governance.api import views as g
from memoryapp import error_pages, health
from memoryapp.api import access, conversations
from memoryapp.api import views as m
from retention.api import views as receipt_views


class EnglishSchemaView(SpectacularAPIView):
    """The OpenAPI schema is one document: English (choice labels included) whatever the caller's
    Accept-Language, unless `?lang=` asks for another."""

    def _get_schema_response(self, request):
        with translation.override(request.GET.get("lang") or "en"):
            return super()._get_schema_response(request)


# Every id in a path is `<id:…>`: a malformed or out-of-range id matches no route (404), never
# reaches a query.
register_converter(IdConverter, "id")

agent_api = [
    path("memories/remember", m.RememberView.as_view(), name="agent-remember"),
    path("memories/recall", m.RecallView.as_view(), name="agent-recall"),
    path("memories/list", m.ListView.as_view(), name="agent-list"),
    path("memories/forget", m.ForgetView.as_view(), name="agent-forget"),
    path("conversations/turns", conversations.TurnsView.as_view(), name="agent-conversation-turns"),
    path("usage/replies", conversations.ReplyUsageView.as_view(), name="agent-reply-usage"),
]

workspace_api = [
    path("ask-history/settings", g.SettingsView.as_view()),
    path("ask-history/settings/agent-memories", m.BulkDeleteAgentMemoriesView.as_view()),
    path("ask-history/agent-memories", m.AgentMemoriesView.as_view()),
    path("ask-history/agent-memories/<id:memory_id>", m.AgentMemoryView.as_view()),
    path("ask-history/access-log", access.AccessLogView.as_view(), name="access-log"),
    path("me/export", access.ExportView.as_view(), name="member-export"),
    path("agent-credentials", g.CredentialsView.as_view()),
    path("agent-credentials/<id:credential_id>", g.CredentialView.as_view()),
    path("ai-memory/preference", m.PreferenceView.as_view()),
    path("ai-memory/memories", m.AssistantMemoriesView.as_view()),
    path("ai-memory/memories/<id:memory_id>", m.AssistantMemoryView.as_view()),
    path("ai-memory/memories/<id:memory_id>/reactivate", m.AssistantMemoryReactivateView.as_view()),
    path("members", g.MembersView.as_view()),
    path("members/<id:member_id>", g.MemberView.as_view()),
    path("collections", g.CollectionsView.as_view()),
    path("collections/<id:collection_id>", g.CollectionView.as_view()),
    path("documents", g.DocumentsView.as_view()),
    path("documents/<id:document_id>", g.DocumentView.as_view()),
    path("documents/<id:document_id>/versions", g.DocumentVersionsView.as_view()),
    path("passages/<id:passage_id>", g.PassageView.as_view()),
    path("entities", g.EntitiesView.as_view()),
    path("context-sets", g.ContextSetsView.as_view()),
    path("context-sets/<id:set_id>", g.ContextSetView.as_view()),
    # conversations' agents (SPEC §9)
    path("agents", conversations.AgentsView.as_view()),
    path("agents/<id:agent_id>", conversations.AgentView.as_view()),
]

# The credit, usage and consolidation models moved from retention to the credits app, and the
# admin's URLs name the app: an old link or bookmark lands on the same page. Only
# ids and the admin's own words (change, history, delete) pass, so the target is always local.
MOVED_TO_CREDITS = "usagerecord|modelprice|creditaccount|memberquota|rolequota|ledgerentry|usagerollup|consolidation"

urlpatterns = [
    re_path(
        rf"^admin/retention/(?P<rest>(?:{MOVED_TO_CREDITS})/(?:[\w-]+/)*)$",
        RedirectView.as_view(url="/admin/credits/%(rest)s", permanent=True, query_string=True),
    ),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/schema/", EnglishSchemaView.as_view(), name="schema"),
    path("api/schema/export.json", access.ExportSchemaView.as_view(), name="export-schema"),
    path(".well-known/receipt-signing-key", receipt_views.ReceiptSigningKeyView.as_view(), name="receipt-signing-key"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/agent/v1/", include(agent_api)),
    path("api/w/<id:ws_id>/", include(workspace_api)),
    path("api/w/<id:ws_id>/", include("retention.api.urls")),
    path("api/w/<id:ws_id>/", include("credits.api.urls")),
    path("", include("memoryapp.pages.urls")),
]

handler404 = error_pages.not_found
handler500 = error_pages.server_error
