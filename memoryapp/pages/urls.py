"""Page addresses of SPEC §7 (links, bookmarks and tests rely on them)."""

from django.contrib.auth import views as auth_views
from django.urls import include, path

from memoryapp.pages.forms import LoginForm
from memoryapp.pages.views import agent_access, agent_memories, ai_memory, ask_history, home, usage

app_name = "pages"

workspace_pages = [
    path("what-bundata-remembers/", agent_memories.agent_memories, name="agent-memories"),
    path(
        "what-bundata-remembers/delete-all/", agent_memories.agent_memories_delete_all, name="agent-memories-delete-all"
    ),
    path(
        "what-bundata-remembers/<id:memory_id>/delete/", agent_memories.agent_memory_delete, name="agent-memory-delete"
    ),
    path("ai-memory/", ai_memory.ai_memory, name="ai-memory"),
    path("ai-memory/preference/", ai_memory.ai_memory_preference, name="ai-memory-preference"),
    path("ai-memory/add/", ai_memory.ai_memory_add, name="ai-memory-add"),
    path("ai-memory/<id:memory_id>/edit/", ai_memory.ai_memory_edit, name="ai-memory-edit"),
    path("ai-memory/<id:memory_id>/delete/", ai_memory.ai_memory_delete, name="ai-memory-delete"),
    path("ai-memory/<id:memory_id>/reactivate/", ai_memory.ai_memory_reactivate, name="ai-memory-reactivate"),
    path("settings/agent-access/", agent_access.agent_access, name="agent-access"),
    path(
        "settings/agent-access/<id:credential_id>/revoke/", agent_access.agent_access_revoke, name="agent-access-revoke"
    ),
    path("settings/ask-history/", ask_history.ask_history, name="ask-history"),
    path(
        "settings/ask-history/delete-agent-memories/", ask_history.ask_history_delete_all, name="ask-history-delete-all"
    ),
    path("usage/", usage.usage, name="usage"),
]

urlpatterns = [
    path("", home.home, name="home"),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(
            template_name="pages/login.html", authentication_form=LoginForm, redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("w/<id:ws_id>/", include(workspace_pages)),
    path("i18n/", include("django.conf.urls.i18n")),
]
