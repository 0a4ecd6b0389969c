"""Pages for people (SPEC §7): server-rendered, usable without JavaScript, in English and Japanese.

Every page resolves the workspace and the caller's membership through `member_page` (404 for a
workspace the caller does not belong to, like the workspace API). Writes go through the actions;
their refusals (`ApiError`) become form errors or messages in the reader's language. What the
templates show (labels, rows) is built by `memoryapp.pages.presenters`, the usage chart's geometry
by `memoryapp.pages.charts`.

Decisions where the SPEC is silent:
- A new credential's token is rendered in the response to the POST itself (with
  `Cache-Control: no-store`) instead of POST → redirect: a redirect would have to park the token in
  the session, the messages cookie or the database, and it must live nowhere but that one page.
- Editing an AI memory changes its type, summary and details; the topic is its identity (the key of
  its version chain), so renaming is "add the new topic, delete the old one".
- Destructive actions (delete one AI memory, delete all own agent memories, the owner's bulk delete)
  have a confirmation page (GET) and act only on POST; deleting one agent memory from its row acts
  at once, like the API, and says how many versions were erased.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import ApiError
from core.timestamps import InvalidInstant, end_of_day
from credits import usage as credit_usage
from governance import actions as governance_actions
from governance.auth import MembershipRestarted, active_membership
from governance.models import AskHistorySettings, Credential, Member
from memoryapp import access_log, actions, assistant
from memoryapp.models import MemoryVersion
from memoryapp.pages import presenters
from memoryapp.pages.charts import usage_chart
from memoryapp.pages.forms import AskHistorySettingsForm, AssistantMemoryEditForm, AssistantMemoryForm, CredentialForm
from memoryapp.pages.presenters import error_text, masked_note
from memoryapp.visibility import member_versions
from retention import previews as retention_previews

PAGE_SIZE = 50
ACCESS_PAGE_SIZE = 20
# Usage records per page, newest first; `?page=N` (a page that is no number or out of range shows
# the first or the last page, never an error).
USAGE_PAGE_SIZE = 50


# --- the one workspace resolver ----------------------------------------------------------------
def resolve_member(request: HttpRequest, ws_id: int) -> Member:
    member = active_membership(request, ws_id)
    if member is None:
        raise Http404("No such workspace.")
    return member


def log_in_again(request: HttpRequest) -> HttpResponse:
    """The session predates the caller's current membership (they were removed and re-added):
    it ends, and the login page brings them back here. Ending it (rather than only redirecting)
    is what makes the login page ask: it sends a logged-in visitor straight on."""
    logout(request)
    messages.warning(request, _("You were added to this workspace again. Log in again to open it."))
    return redirect_to_login(request.get_full_path())


def member_page(permission: str | None = None) -> Callable:
    """Logged in, an active member of the workspace (else 404; a session older than the current
    membership period logs in again), and holding `permission` (else 403)."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        @login_required
        def wrapped(request: HttpRequest, ws_id: int, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                member = resolve_member(request, ws_id)
            except MembershipRestarted:
                return log_in_again(request)
            if permission and not member.has_perm(permission):
                raise PermissionDenied
            request.member = member
            return view(request, member, *args, **kwargs)

        wrapped.page_permission = permission
        return wrapped

    return decorate


def page(request: HttpRequest, member: Member, template: str, context: dict[str, Any], *, current: str, status: int = 200) -> HttpResponse:
    return render(request, template, {**presenters.frame(request.user, member, current), **context}, status=status)


def add_api_error(form: Form, exc: ApiError, field_map: dict[str, str] | None = None) -> None:
    fields = exc.details.get("fields", {}) if isinstance(exc.details, dict) else {}
    placed = False
    for api_field, problems in fields.items():
        name = (field_map or {}).get(api_field, api_field)
        if name in form.fields:
            if api_field == "topic":
                form.add_error(name, _("Use English snake_case, for example preferred_language."))
            elif exc.code == "AGENT_MEMORY_PERSONAL_DATA":
                form.add_error(name, error_text(exc))  # the details list the kinds found, not a sentence
            else:
                form.add_error(name, [str(p) for p in problems] if isinstance(problems, list) else str(problems))
            placed = True
    if not placed:
        form.add_error(None, error_text(exc))


# --- entry points ------------------------------------------------------------------------------
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("pages:login")
    first = Member.objects.active().filter(user=request.user).order_by("workspace_id").first()
    if first is None:
        return render(request, "pages/no_workspace.html", status=200)
    return redirect("pages:ai-memory", first.workspace_id)


# --- What Bundata remembers → Agent memories -------------------------------------------------
def _own_agent_memories(member: Member, namespace: str | None = None) -> QuerySet[MemoryVersion]:
    return member_versions(member, member.workspace.ask_history, agent_memories_only=True, namespace=namespace)


@require_GET
@member_page()
def agent_memories(request: HttpRequest, member: Member) -> HttpResponse:
    ask_history = member.workspace.ask_history
    namespaces = sorted(set(_own_agent_memories(member).values_list("namespace", flat=True)))
    namespace = request.GET.get("namespace", "")
    cursor = request.GET.get("cursor") or None
    try:
        result = actions.paginate(_own_agent_memories(member, namespace), member, ask_history, limit=PAGE_SIZE, cursor=cursor)
        entries, access_next = access_log.page_of(access_log.member_entries(member), member, limit=ACCESS_PAGE_SIZE, cursor=request.GET.get("access") or None)
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
        messages.success(request, ngettext("Memory deleted (%(n)d version erased).", "Memory deleted (%(n)d versions erased).", result["deleted"]) % {"n": result["deleted"]})
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
            return _delete_all_confirm(request, member, exc.details["manifest"], exc.details["planToken"], outdated=True)
        if result["deleted"]:
            messages.success(
                request, ngettext("Deleted all your agent memories (%(n)d version erased).", "Deleted all your agent memories (%(n)d versions erased).", result["deleted"]) % {"n": result["deleted"]}
            )
        else:
            messages.info(request, _("You had no agent memories to delete."))
        return redirect("pages:agent-memories", member.workspace_id)
    preview = actions.delete_all_own_agent_memories(member, dry_run=True)
    return _delete_all_confirm(request, member, preview["manifest"], preview["planToken"])


def _delete_all_confirm(request: HttpRequest, member: Member, manifest: dict[str, Any], token: str, *, outdated: bool = False) -> HttpResponse:
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


# --- AI memory (assistant memories) ------------------------------------------------------------
def _memory_writable(member: Member) -> bool:
    return member.workspace.ai_memory_available and member.workspace.retains_history


@require_GET
@member_page()
def ai_memory(request: HttpRequest, member: Member) -> HttpResponse:
    listing = assistant.list_assistant_memories(member)
    return page(
        request,
        member,
        "pages/ai_memory.html",
        {
            "available": listing["available"],
            "remember_me": listing["rememberMe"],
            "retains_history": member.workspace.retains_history,
            "writable": _memory_writable(member),
            "memories": presenters.assistant_rows(listing["memories"]),
            "expired": presenters.assistant_rows(listing["expired"]),
            "highlight": request.GET.get("saved", ""),
        },
        current="pages:ai-memory",
    )


@require_POST
@member_page()
def ai_memory_preference(request: HttpRequest, member: Member) -> HttpResponse:
    enabled = request.POST.get("remember_me") == "on"
    try:
        governance_actions.set_remember_me(member, enabled)
    except ApiError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(request, _("AI memory enabled") if enabled else _("AI memory disabled"))
    return redirect("pages:ai-memory", member.workspace_id)


def _saved_message(request: HttpRequest, version: MemoryVersion, verb: str) -> None:
    if version.masked_kinds:
        messages.warning(request, _("%(verb)s Personal data was masked before saving: %(kinds)s.") % {"verb": verb, "kinds": masked_note(version.masked_kinds)})
    else:
        messages.success(request, verb)


@require_http_methods(["GET", "POST"])
@member_page()
def ai_memory_add(request: HttpRequest, member: Member) -> HttpResponse:
    form = AssistantMemoryForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version, superseded = assistant.add_assistant_memory(member, kind=data["kind"], topic=data["topic"], summary=data["summary"], details=data["details"])
        except ApiError as exc:
            add_api_error(form, exc, {"key": "topic", "text": "summary"})
        else:
            _saved_message(request, version, _("Memory updated: the topic already existed, so a new version was saved.") if superseded else _("Memory saved."))
            return redirect(reverse("pages:ai-memory", args=[member.workspace_id]) + f"?saved={version.pk}#memory-{version.pk}")
    return page(request, member, "pages/ai_memory_form.html", {"form": form, "editing": None, "writable": _memory_writable(member)}, current="pages:ai-memory")


def _own_assistant_memory(member: Member, memory_id: int) -> dict[str, Any]:
    listing = assistant.list_assistant_memories(member)
    for item in listing["memories"] + listing["expired"]:
        if item["id"] == str(memory_id):
            return item
    raise Http404("No such memory.")


@require_http_methods(["GET", "POST"])
@member_page()
def ai_memory_edit(request: HttpRequest, member: Member, memory_id: int) -> HttpResponse:
    item = _own_assistant_memory(member, memory_id)
    initial = {"kind": item["kind"] or "fact", "summary": item["summary"], "details": "\n".join(item["details"])}
    form = AssistantMemoryEditForm(request.POST or None, initial=initial, current_kind=item["kind"] or "")
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = assistant.edit_assistant_memory(member, int(item["id"]), kind=data["kind"], summary=data["summary"], details=data["details"])
        except ApiError as exc:
            add_api_error(form, exc, {"text": "summary"})
        else:
            _saved_message(request, version, _("Memory updated."))
            return redirect(reverse("pages:ai-memory", args=[member.workspace_id]) + f"?saved={version.pk}#memory-{version.pk}")
    return page(request, member, "pages/ai_memory_form.html", {"form": form, "editing": presenters.assistant_rows([item])[0], "writable": _memory_writable(member)}, current="pages:ai-memory")


@require_http_methods(["GET", "POST"])
@member_page()
def ai_memory_delete(request: HttpRequest, member: Member, memory_id: int) -> HttpResponse:
    if request.method == "POST":
        try:
            actions.delete_own_memory(member, memory_id, agent_only=False)
        except ApiError as exc:
            messages.error(request, error_text(exc))
        else:
            messages.success(request, _("Memory deleted."))
        return redirect("pages:ai-memory", member.workspace_id)
    item = _own_assistant_memory(member, memory_id)
    return page(request, member, "pages/ai_memory_delete.html", {"memory": presenters.assistant_rows([item])[0]}, current="pages:ai-memory")


@require_POST
@member_page()
def ai_memory_reactivate(request: HttpRequest, member: Member, memory_id: int) -> HttpResponse:
    try:
        version = assistant.reactivate_assistant_memory(member, memory_id)
    except ApiError as exc:
        messages.error(request, error_text(exc))
        return redirect("pages:ai-memory", member.workspace_id)
    messages.success(request, _("Memory reactivated."))
    return redirect(reverse("pages:ai-memory", args=[member.workspace_id]) + f"?saved={version.pk}#memory-{version.pk}")


# --- Settings → Agent access ---------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
@member_page()
def agent_access(request: HttpRequest, member: Member) -> HttpResponse:
    form = CredentialForm(request.POST or None, workspace=member.workspace)
    created = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            expires_at = end_of_day(data["expires_on"]) if data["expires_on"] else None
            credential, token = governance_actions.create_credential(member, name=data["name"], scopes=data["scopes"], context_set=data["context_set"], expires_at=expires_at)
        except InvalidInstant as exc:
            form.add_error("expires_on", str(exc))
        except ApiError as exc:
            add_api_error(form, exc, {"expiresAt": "expires_on", "contextSetId": "context_set"})
        else:
            # The token exists only in this response: it is never stored, flashed or put in a session.
            created = {"credential": credential, "token": token}
            form = CredentialForm(workspace=member.workspace)
    response = page(
        request,
        member,
        "pages/agent_access.html",
        {
            "form": form,
            "scope_options": presenters.scope_options(member, form),
            "created": created,
            "credentials": presenters.credential_rows(member),
            "account_notices": presenters.account_notices(member.user),
            "agent_memories_enabled": member.workspace.ask_history.agent_memories_enabled,
        },
        current="pages:agent-access",
    )
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@member_page()
def agent_access_revoke(request: HttpRequest, member: Member, credential_id: int) -> HttpResponse:
    credential = Credential.objects.filter(workspace=member.workspace, member=member, pk=credential_id).first()
    if credential is None:
        raise Http404("No such credential.")
    governance_actions.revoke_credential(credential, actor=request.user)
    messages.success(request, _("Credential “%(name)s” revoked. Agents using it are refused from now on.") % {"name": credential.name})
    return redirect("pages:agent-access", member.workspace_id)


# --- Settings → Ask history (owner) --------------------------------------------------------------
CONFIRMED_FIELDS = ("agentMemories", "agentVersions", "assistantErased", "assistantToExpired", "assistantRestored")


def _confirmed(post: Any) -> dict[str, int] | None:
    """The numbers of the preview the owner confirmed (hidden fields), or None if not a confirmation."""
    if post.get("confirm") != "yes":
        return None
    try:
        return {name: int(post.get(f"seen_{name}", "")) for name in CONFIRMED_FIELDS}
    except ValueError:
        return {"unreadable": -1}  # tampered or missing: never equal to a preview, so it is shown again


def _ask_history_page(request: HttpRequest, member: Member, form: Form, *, status: int = 200) -> HttpResponse:
    return page(
        request,
        member,
        "pages/ask_history.html",
        {
            "form": form,
            "counts": presenters.agent_memory_counts(member),
            "receipts": presenters.receipt_rows(member),
            "chain": presenters.receipt_chain_status(member),
        },
        current="pages:ask-history",
        status=status,
    )


@require_http_methods(["GET", "POST"])
@member_page("ask_history:manage")
def ask_history(request: HttpRequest, member: Member) -> HttpResponse:
    """Save the settings; a retention change that erases or moves memories is previewed first
    (a confirmation step with the counts), and saving applies it at once, with receipts."""
    ask_history = member.workspace.ask_history
    # The form's fields are the model's: the API names map to both.
    initial = {field: getattr(ask_history, field) for field in AskHistorySettings.API_FIELDS.values()}
    form = AskHistorySettingsForm(request.POST or None, initial=initial)
    if request.method != "POST" or not form.is_valid():
        return _ask_history_page(request, member, form)
    changes = {api: form.cleaned_data[field] for api, field in AskHistorySettings.API_FIELDS.items()}
    confirmed = _confirmed(request.POST)
    try:
        plan = request.POST.get("seen_plan", "") if confirmed is not None else None
        result = retention_previews.save_settings_or_ask_confirmation(member.workspace, changes, actor=request.user, confirmed=confirmed, confirmed_plan=plan)
        if result["needsConfirmation"]:
            return _ask_history_confirm(request, member, changes, result["manifest"], result["planToken"])
    except ApiError as exc:
        if exc.code == retention_previews.PREVIEW_OUTDATED:
            return _ask_history_confirm(request, member, changes, exc.details["manifest"], exc.details["planToken"], outdated=True)
        add_api_error(form, exc)
        return _ask_history_page(request, member, form)
    applied = result["applied"]
    if applied and (applied["agentVersionsErased"] or applied["assistantVersionsErased"]):
        erased = applied["agentVersionsErased"] + applied["assistantVersionsErased"]
        messages.success(
            request,
            ngettext(
                "Settings saved. %(n)s memory version was erased now; its deletion receipt is listed below.",
                "Settings saved. %(n)s memory versions were erased now; their deletion receipts are listed below.",
                erased,
            )
            % {"n": presenters.number(erased)},
        )
    else:
        messages.success(request, _("Settings saved."))
    if applied and applied["assistantExpired"]:
        messages.info(
            request,
            ngettext("%(n)s assistant memory moved to Expired.", "%(n)s assistant memories moved to Expired.", applied["assistantExpired"]) % {"n": presenters.number(applied["assistantExpired"])},
        )
    if applied and applied["assistantRestored"]:
        messages.info(
            request,
            ngettext("%(n)s expired assistant memory was brought back.", "%(n)s expired assistant memories were brought back.", applied["assistantRestored"])
            % {"n": presenters.number(applied["assistantRestored"])},
        )
    return redirect("pages:ask-history", member.workspace_id)


def _ask_history_confirm(request: HttpRequest, member: Member, changes: dict[str, Any], manifest: dict[str, Any], token: str, *, outdated: bool = False) -> HttpResponse:
    return page(
        request,
        member,
        "pages/ask_history_confirm.html",
        {
            "changes": {field: changes[api] for api, field in AskHistorySettings.API_FIELDS.items()},
            "manifest": manifest,
            "sentences": presenters.retention_sentences(manifest),
            "rows": presenters.manifest_rows(manifest, owner=True),
            "seen": {**retention_previews.preview_summary(manifest), "plan": token},
            "outdated": outdated,
        },
        current="pages:ask-history",
        status=409 if outdated else 200,
    )


@require_http_methods(["GET", "POST"])
@member_page("ask_history:manage")
def ask_history_delete_all(request: HttpRequest, member: Member) -> HttpResponse:
    if request.method == "POST":
        try:  # a form without the token (an old page) is held to a preview it never saw: refused
            result = actions.delete_all_agent_memories(member.workspace, actor=request.user, confirmed=request.POST.get("planToken", ""))
        except ApiError as exc:
            if exc.code != retention_previews.PREVIEW_OUTDATED:
                raise
            return _owner_delete_all_confirm(request, member, exc.details["manifest"], exc.details["planToken"], outdated=True)
        versions = int(result["deleted"].get("memory_version", 0))
        if versions:
            messages.success(
                request,
                ngettext(
                    "Deleted every agent memory in the workspace (%(n)d version erased). Deletion receipts were recorded, one per member.",
                    "Deleted every agent memory in the workspace (%(n)d versions erased). Deletion receipts were recorded, one per member.",
                    versions,
                )
                % {"n": versions},
            )
        else:
            messages.info(request, _("There were no agent memories to delete."))
        return redirect("pages:ask-history", member.workspace_id)
    preview = actions.delete_all_agent_memories(member.workspace, actor=request.user, dry_run=True)
    return _owner_delete_all_confirm(request, member, preview["manifest"], preview["planToken"])


def _owner_delete_all_confirm(request: HttpRequest, member: Member, manifest: dict[str, Any], token: str, *, outdated: bool = False) -> HttpResponse:
    return page(
        request,
        member,
        "pages/ask_history_delete_all.html",
        {
            "counts": presenters.agent_memory_counts(member),
            "manifest": manifest,
            "rows": presenters.manifest_rows(manifest, owner=True),
            "plan_token": token,
            "outdated": outdated,
        },
        current="pages:ask-history",
        status=409 if outdated else 200,
    )


# --- Usage ----------------------------------------------------------------------------------------
@require_GET
@member_page()
def usage(request: HttpRequest, member: Member) -> HttpResponse:
    queryset = credit_usage.visible_usage(member)
    page_obj = Paginator(queryset.select_related("member__user").order_by("-created_at", "-id"), USAGE_PAGE_SIZE).get_page(request.GET.get("page"))
    records = list(page_obj.object_list)
    totals = credit_usage.usage_totals(queryset)
    return page(
        request,
        member,
        "pages/usage.html",
        {
            "rows": presenters.usage_rows(records),
            "page_obj": page_obj,
            "sees_all": member.has_perm("usage:read_all"),
            "totals": totals,
            "chart": usage_chart(queryset, timezone.localdate()) if records else None,
        },
        current="pages:usage",
    )
