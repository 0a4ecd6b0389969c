"""What Bundata remembers (SPEC §7): the member's own agent memories, the access log beside them,
deleting one from its row (at once, like the API) and deleting all of them (a confirmation page
from the preview's manifest, acting only on POST)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import ApiError
from governance.models import Member
from memoryapp import access_log, actions
from memoryapp.models import MemoryVersion
from memoryapp.pages import presenters
from memoryapp.pages.presenters import error_text
from memoryapp.pages.views.base import member_page, page
from retention import previews as retention_previews

PAGE_SIZE = 50
ACCESS_PAGE_SIZE = 20


def _own_agent_memories(member: Member, namespace: str | None = None) -> QuerySet[MemoryVersion]:
    return MemoryVersion.objects.restrict(member, "view").agent().matching(namespace=namespace)


@require_GET
@member_page()
def agent_memories(request: HttpRequest, member: Member) -> HttpResponse:
    ask_history = member.workspace.ask_history
    namespaces = sorted(set(_own_agent_memories(member).values_list("namespace", flat=True)))
    namespace = request.GET.get("namespace", "")
    cursor = request.GET.get("cursor") or None
    try:
        result = actions.paginate(
            _own_agent_memories(member, namespace), member, ask_history, limit=PAGE_SIZE, cursor=cursor
        )
        entries, access_next = access_log.page_of(
            access_log.member_entries(member), member, limit=ACCESS_PAGE_SIZE, cursor=request.GET.get("access") or None
        )
    except ApiError:
        return redirect(reverse("pages:agent-memories", args=[member.workspace_id]))
    visible, hidden = access_log.readable_versions(member, entries)
    return page(
        request,
        member,
        "pages/agent_memories.html",
        {
            "memories": presenters.agent_memory_rows(result["memories"], member),
            "hidden": result["hidden"],
            "next_cursor": result["nextCursor"],
            "namespaces": namespaces,
            "namespace": namespace,
            "total": _own_agent_memories(member).count(),
            "ask_history": ask_history,
            "access": presenters.access_rows(entries, visible, hidden),
            "access_next": access_next,
            "access_retention_days": settings.ACCESS_LOG_RETENTION_DAYS,
        },
        current="pages:agent-memories",
    )


@require_POST
@member_page()
def agent_memory_delete(request: HttpRequest, member: Member, memory_id: int) -> HttpResponse:
    try:
        result = actions.delete_own_memory(member, memory_id, agent_only=True)
    except ApiError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(
            request,
            ngettext(
                "Memory deleted (%(n)d version erased).", "Memory deleted (%(n)d versions erased).", result["deleted"]
            )
            % {"n": result["deleted"]},
        )
    return redirect(_back(request, reverse("pages:agent-memories", args=[member.workspace_id])))


@require_http_methods(["GET", "POST"])
@member_page()
def agent_memories_delete_all(request: HttpRequest, member: Member) -> HttpResponse:
    if request.method == "POST":
        try:  # a form without the token (an old page) is held to a preview it never saw: refused
            result = actions.delete_all_own_agent_memories(member, confirmed=request.POST.get("planToken", ""))
        except ApiError as exc:
            if exc.code != retention_previews.PREVIEW_OUTDATED:
                raise
            return _delete_all_confirm(
                request, member, exc.details["manifest"], exc.details["planToken"], outdated=True
            )
        if result["deleted"]:
            messages.success(
                request,
                ngettext(
                    "Deleted all your agent memories (%(n)d version erased).",
                    "Deleted all your agent memories (%(n)d versions erased).",
                    result["deleted"],
                )
                % {"n": result["deleted"]},
            )
        else:
            messages.info(request, _("You had no agent memories to delete."))
        return redirect("pages:agent-memories", member.workspace_id)
    preview = actions.delete_all_own_agent_memories(member, dry_run=True)
    return _delete_all_confirm(request, member, preview["manifest"], preview["planToken"])


def _delete_all_confirm(
    request: HttpRequest, member: Member, manifest: dict[str, Any], token: str, *, outdated: bool = False
) -> HttpResponse:
    return page(
        request,
        member,
        "pages/agent_memories_delete_all.html",
        {
            "count": manifest["memories"],
            "manifest": manifest,
            "rows": presenters.manifest_rows(manifest),
            "plan_token": token,
            "outdated": outdated,
        },
        current="pages:agent-memories",
        status=409 if outdated else 200,
    )


def _back(request: HttpRequest, default: str) -> str:
    """Return to the filtered list the form was on (only our own relative paths)."""
    target = request.POST.get("next", "")
    if target.startswith("/w/") and "//" not in target and "\\" not in target:
        return target
    return default
