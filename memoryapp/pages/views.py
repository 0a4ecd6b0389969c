"""Pages for people (SPEC §7): server-rendered, usable without JavaScript, in English and Japanese.

Every page resolves the workspace and the caller's membership through `member_page` (404 for a
workspace the caller does not belong to, like the workspace API). Writes go through the actions;
their refusals (`ApiError`) become form errors or messages in the reader's language.

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

from collections import defaultdict
from datetime import datetime, time, timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal
from functools import wraps
from typing import Any, Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from governance import actions as governance_actions
from governance.api.base import _int_id
from governance.models import Collection, Credential, Member
from governance.permissions import Role, scope_allowed_for_role
from memoryapp import actions, assistant
from memoryapp.errors import ApiError
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, Source
from memoryapp.pages.forms import KIND_CHOICES, AskHistorySettingsForm, AssistantMemoryEditForm, AssistantMemoryForm, CredentialForm
from memoryapp.visibility import current_or_as_of, live_versions
from retention.models import DeletionReceipt, Operation, UsageCategory, UsageRecord

PAGE_SIZE = 50

# Source tags (SPEC §7): the text always says what the colour means.
SOURCE_LABELS = {
    Source.AGENT: gettext_lazy("Agent"),
    Source.USER_REQUEST: gettext_lazy("User request"),
    Source.ASSISTANT_INITIATED: gettext_lazy("Assistant recorded"),
    Source.MANUAL: gettext_lazy("Manual"),
    Source.AI_EXTRACTED: gettext_lazy("AI extracted"),
}

MASK_LABELS = {
    "EMAIL": gettext_lazy("email address"),
    "PHONE": gettext_lazy("phone number"),
    "IL_ID": gettext_lazy("ID number"),
    "CARD": gettext_lazy("payment card number"),
    "BANK_ACCOUNT": gettext_lazy("bank account number"),
    "NUMBER": gettext_lazy("long number"),
    "SECRET": gettext_lazy("secret"),
}

OPERATION_LABELS = {
    Operation.FORGET: gettext_lazy("Forgotten by an agent"),
    Operation.MEMBER_DELETE: gettext_lazy("Deleted by the member"),
    Operation.OWNER_BULK_DELETE: gettext_lazy("Owner deleted all agent memories"),
    Operation.EXPIRY: gettext_lazy("Retention expiry"),
    Operation.GRACE_PURGE: gettext_lazy("Expired grace period ended"),
    Operation.CASCADE_DOCUMENT: gettext_lazy("Cited document deleted"),
    Operation.CASCADE_COLLECTION: gettext_lazy("Collection deleted"),
    Operation.MEMBER_REMOVAL: gettext_lazy("Member removed"),
    Operation.WORKSPACE_DELETION: gettext_lazy("Workspace deleted"),
    Operation.NON_RETAINING: gettext_lazy("Workspace made non-retaining"),
    Operation.ADMIN_ERASE: gettext_lazy("Erased by a platform admin"),
    Operation.FORGETTING_CHECK: gettext_lazy("Forgetting check"),
}

ROLE_LABELS = {
    "viewer": gettext_lazy("viewer"),
    "editor": gettext_lazy("editor"),
    "admin": gettext_lazy("admin"),
    "owner": gettext_lazy("owner"),
}

# The navigation, in order: (url name, label, permission needed or None, group).
NAV = [
    ("pages:ai-memory", gettext_lazy("AI memory"), None, gettext_lazy("Memory")),
    ("pages:agent-memories", gettext_lazy("What Bundata remembers"), None, gettext_lazy("Memory")),
    ("pages:agent-access", gettext_lazy("Agent access"), None, gettext_lazy("Settings")),
    ("pages:ask-history", gettext_lazy("Ask history"), "ask_history:manage", gettext_lazy("Settings")),
    ("pages:usage", gettext_lazy("Usage"), None, gettext_lazy("Credits")),
]


# --- the one workspace resolver ----------------------------------------------------------------
def resolve_member(request: HttpRequest, ws_id: str) -> Member:
    member = (
        Member.objects.select_related("workspace", "workspace__ask_history", "user")
        .filter(workspace_id=_int_id(ws_id), user=request.user, left_at__isnull=True)
        .first()
    )
    if member is None:
        raise Http404("No such workspace.")
    return member


def member_page(permission: str | None = None) -> Callable:
    """Logged in, an active member of the workspace (else 404), and holding `permission` (else 403)."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        @login_required
        def wrapped(request: HttpRequest, ws_id: str, *args: Any, **kwargs: Any) -> HttpResponse:
            member = resolve_member(request, ws_id)
            if permission and not member.has_perm(permission):
                raise PermissionDenied
            request.member = member
            return view(request, member, *args, **kwargs)

        wrapped.page_permission = permission
        return wrapped

    return decorate


def page(request: HttpRequest, member: Member, template: str, context: dict[str, Any], *, current: str, status: int = 200) -> HttpResponse:
    ws = member.workspace.pk
    nav: list[dict[str, Any]] = []
    for name, label, permission, group in NAV:
        if permission is None or member.has_perm(permission):
            if not nav or nav[-1]["label"] != group:
                nav.append({"label": group, "items": []})
            nav[-1]["items"].append({"url": reverse(name, args=[ws]), "label": label, "current": name == current})
    permission_of = {name: permission for name, _label, permission, _group in NAV}
    switcher = []
    for other in Member.objects.filter(user=request.user, left_at__isnull=True).select_related("workspace").order_by("workspace__name", "workspace_id"):
        # Stay on the same page in the other workspace when allowed there, else land on AI memory.
        needed = permission_of.get(current)
        target = current if needed is None or other.has_perm(needed) else "pages:ai-memory"
        switcher.append({"name": other.workspace.name, "url": reverse(target, args=[other.workspace_id]), "current": other.workspace_id == ws, "role": ROLE_LABELS.get(other.role, other.role)})
    base = {"member": member, "workspace": member.workspace, "nav": nav, "switcher": switcher, "role_label": ROLE_LABELS.get(member.role, member.role)}
    return render(request, template, {**base, **context}, status=status)


def error_text(exc: ApiError) -> str:
    """The action's refusal in the reader's language (the English message for unknown codes)."""
    reason = exc.details.get("reason") if isinstance(exc.details, dict) else None
    known = {
        "AGENT_MEMORY_EMPTY": _("Nothing is left of the text once personal data is masked."),
        "AGENT_MEMORY_PERSONAL_DATA": _("The topic must not contain personal data."),
        "AGENT_MEMORY_FULL": _("You already have the maximum number of stored memory versions in this workspace."),
        "NON_RETAINING_WORKSPACE": _("This workspace keeps no history, so it keeps no memories."),
        "MEMORY_NOT_FOUND": _("No such memory. It may already have been deleted."),
        "INSUFFICIENT_ROLE": _("A scope above your role cannot be granted."),
        "VALIDATION_ERROR": _("Please correct the highlighted fields."),
    }
    if exc.code == "AGENT_MEMORY_DISABLED":
        if reason == "organization":
            return _("AI memory is not enabled for your organization")
        if reason == "workspace":
            return _("The workspace owner has not enabled agent memories.")
        return _("AI memory is off; the assistant currently does not read or add memories")
    return known.get(exc.code, exc.message)


def add_api_error(form, exc: ApiError, field_map: dict[str, str] | None = None) -> None:
    fields = exc.details.get("fields", {}) if isinstance(exc.details, dict) else {}
    placed = False
    for api_field, problems in fields.items():
        name = (field_map or {}).get(api_field, api_field)
        if name in form.fields:
            if api_field == "topic":
                form.add_error(name, _("Use English snake_case, for example preferred_language."))
            else:
                form.add_error(name, [str(p) for p in problems] if isinstance(problems, list) else str(problems))
            placed = True
    if not placed:
        form.add_error(None, error_text(exc))


def masked_note(kinds: list[str]) -> str:
    return ", ".join(str(MASK_LABELS.get(k, k)) for k in kinds)


# --- entry points ------------------------------------------------------------------------------
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("pages:login")
    first = Member.objects.filter(user=request.user, left_at__isnull=True).order_by("workspace_id").first()
    if first is None:
        return render(request, "pages/no_workspace.html", status=200)
    return redirect("pages:ai-memory", first.workspace_id)


# --- What Bundata remembers → Agent memories -------------------------------------------------
def _own_agent_memories(member: Member):
    return current_or_as_of(live_versions(member, member.workspace.ask_history), None).exclude(namespace=ASSISTANT_NAMESPACE)


@require_GET
@member_page()
def agent_memories(request: HttpRequest, member: Member) -> HttpResponse:
    settings = member.workspace.ask_history
    queryset = _own_agent_memories(member)
    namespaces = sorted(set(queryset.values_list("namespace", flat=True)))
    namespace = request.GET.get("namespace", "")
    if namespace:
        queryset = queryset.filter(namespace=namespace)
    cursor = request.GET.get("cursor") or None
    try:
        result = actions.paginate(queryset, member, settings, limit=PAGE_SIZE, cursor=cursor)
    except ApiError:
        return redirect(reverse("pages:agent-memories", args=[member.workspace_id]))
    memories = result["memories"]
    collection_ids = {int(m["collectionId"]) for m in memories if m["collectionId"]}
    names = dict(Collection.objects.filter(workspace=member.workspace, pk__in=collection_ids).values_list("pk", "name")) if collection_ids else {}
    rows = []
    for m in memories:
        rows.append({
            **m,
            "created": parse_datetime(m["createdAt"]),
            "expires": parse_datetime(m["expiresAt"]),
            "collection_name": names.get(int(m["collectionId"])) if m["collectionId"] else None,
            "source_label": SOURCE_LABELS.get(m["source"], m["source"]),
            "masked_note": masked_note(m["masked"]),
            "citation_count": len(m["citations"]),
        })
    return page(request, member, "pages/agent_memories.html", {
        "memories": rows,
        "hidden": result["hidden"],
        "next_cursor": result["nextCursor"],
        "namespaces": namespaces,
        "namespace": namespace,
        "total": _own_agent_memories(member).count(),
        "settings": settings,
    }, current="pages:agent-memories")


@require_POST
@member_page()
def agent_memory_delete(request: HttpRequest, member: Member, memory_id: str) -> HttpResponse:
    try:
        result = actions.delete_own_memory(member, _int_id(memory_id), agent_only=True)
    except ApiError as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(request, ngettext("Memory deleted (%(n)d version erased).", "Memory deleted (%(n)d versions erased).", result["deleted"]) % {"n": result["deleted"]})
    return redirect(_back(request, reverse("pages:agent-memories", args=[member.workspace_id])))


@require_http_methods(["GET", "POST"])
@member_page()
def agent_memories_delete_all(request: HttpRequest, member: Member) -> HttpResponse:
    if request.method == "POST":
        result = actions.delete_all_own_agent_memories(member)
        if result["deleted"]:
            messages.success(request, ngettext("Deleted all your agent memories (%(n)d version erased).", "Deleted all your agent memories (%(n)d versions erased).", result["deleted"]) % {"n": result["deleted"]})
        else:
            messages.info(request, _("You had no agent memories to delete."))
        return redirect("pages:agent-memories", member.workspace_id)
    count = _own_agent_memories(member).count()
    return page(request, member, "pages/agent_memories_delete_all.html", {"count": count}, current="pages:agent-memories")


def _back(request: HttpRequest, default: str) -> str:
    """Return to the filtered list the form was on (only our own relative paths)."""
    target = request.POST.get("next", "")
    if target.startswith("/w/") and "//" not in target and "\\" not in target:
        return target
    return default


# --- AI memory (assistant memories) ------------------------------------------------------------
def _assistant_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = dict(KIND_CHOICES)
    rows = []
    for item in items:
        rows.append({
            **item,
            "kind_label": kinds.get(item["kind"], item["kind"] or "—"),
            "source_label": SOURCE_LABELS.get(item["source"], item["source"]),
            "created": parse_datetime(item["createdAt"]),
            "updated": parse_datetime(item["updatedAt"]),
            "expires": parse_datetime(item["expiresAt"]),
            "erased": parse_datetime(item["erasedAt"]) if item.get("erasedAt") else None,
            "masked_note": masked_note(item["masked"]),
        })
    return rows


def _memory_writable(member: Member) -> bool:
    return member.workspace.ai_memory_available and member.workspace.retains_history


@require_GET
@member_page()
def ai_memory(request: HttpRequest, member: Member) -> HttpResponse:
    listing = assistant.list_assistant_memories(member)
    return page(request, member, "pages/ai_memory.html", {
        "available": listing["available"],
        "remember_me": listing["rememberMe"],
        "retains_history": member.workspace.retains_history,
        "writable": _memory_writable(member),
        "memories": _assistant_rows(listing["memories"]),
        "expired": _assistant_rows(listing["expired"]),
        "highlight": request.GET.get("saved", ""),
    }, current="pages:ai-memory")


@require_POST
@member_page()
def ai_memory_preference(request: HttpRequest, member: Member) -> HttpResponse:
    if not member.workspace.ai_memory_available:
        messages.error(request, _("AI memory is not enabled for your organization"))
    else:
        enabled = request.POST.get("remember_me") == "on"
        governance_actions.set_remember_me(member, enabled)
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


def _own_assistant_memory(member: Member, memory_id: str) -> dict[str, Any]:
    listing = assistant.list_assistant_memories(member)
    for item in listing["memories"] + listing["expired"]:
        if item["id"] == str(_int_id(memory_id)):
            return item
    raise Http404("No such memory.")


@require_http_methods(["GET", "POST"])
@member_page()
def ai_memory_edit(request: HttpRequest, member: Member, memory_id: str) -> HttpResponse:
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
    return page(request, member, "pages/ai_memory_form.html", {"form": form, "editing": _assistant_rows([item])[0], "writable": _memory_writable(member)}, current="pages:ai-memory")


@require_http_methods(["GET", "POST"])
@member_page()
def ai_memory_delete(request: HttpRequest, member: Member, memory_id: str) -> HttpResponse:
    if request.method == "POST":
        try:
            actions.delete_own_memory(member, _int_id(memory_id), agent_only=False)
        except ApiError as exc:
            messages.error(request, error_text(exc))
        else:
            messages.success(request, _("Memory deleted."))
        return redirect("pages:ai-memory", member.workspace_id)
    item = _own_assistant_memory(member, memory_id)
    return page(request, member, "pages/ai_memory_delete.html", {"memory": _assistant_rows([item])[0]}, current="pages:ai-memory")


@require_POST
@member_page()
def ai_memory_reactivate(request: HttpRequest, member: Member, memory_id: str) -> HttpResponse:
    try:
        version = assistant.reactivate_assistant_memory(member, _int_id(memory_id))
    except ApiError as exc:
        messages.error(request, error_text(exc))
        return redirect("pages:ai-memory", member.workspace_id)
    messages.success(request, _("Memory reactivated."))
    return redirect(reverse("pages:ai-memory", args=[member.workspace_id]) + f"?saved={version.pk}#memory-{version.pk}")


# --- Settings → Agent access ---------------------------------------------------------------------
def _scope_options(member: Member, form: CredentialForm) -> list[dict[str, Any]]:
    chosen = set(form["scopes"].value() or []) if form.is_bound else set()
    options = []
    for scope, minimum, description in (
        ("memory:read", Role.VIEWER, _("Recall and list your memories")),
        ("memory:write", Role.EDITOR, _("Remember and forget memories for you")),
    ):
        allowed = scope_allowed_for_role(scope, member.role)
        options.append({
            "value": scope,
            "description": description,
            "allowed": allowed,
            "checked": allowed and scope in chosen,
            "reason": "" if allowed else _("Needs the %(needed)s role or above; your role is %(role)s.") % {"needed": ROLE_LABELS[minimum.label], "role": ROLE_LABELS.get(member.role, member.role)},
        })
    return options


def _credential_rows(member: Member) -> list[dict[str, Any]]:
    now = timezone.now()
    rows = []
    for credential in Credential.objects.filter(workspace=member.workspace, member=member).select_related("context_set"):
        if credential.is_revoked:
            status, status_label = "revoked", _("Revoked")
        elif credential.is_expired(now):
            status, status_label = "expired", _("Expired")
        else:
            status, status_label = "active", _("Active")
        disabled_scopes = [s for s in credential.scopes if s in ("memory:read", "memory:write") and not scope_allowed_for_role(s, member.role)]
        rows.append({"credential": credential, "status": status, "status_label": status_label, "disabled_scopes": disabled_scopes})
    return rows


@require_http_methods(["GET", "POST"])
@member_page()
def agent_access(request: HttpRequest, member: Member) -> HttpResponse:
    form = CredentialForm(request.POST or None, workspace=member.workspace)
    created = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        expires_at = None
        if data["expires_on"]:
            expires_at = datetime.combine(data["expires_on"] + timedelta(days=1), time.min, tzinfo=dt_timezone.utc)
        try:
            credential, token = governance_actions.create_credential(member, name=data["name"], scopes=data["scopes"], context_set=data["context_set"], expires_at=expires_at)
        except ApiError as exc:
            add_api_error(form, exc, {"expiresAt": "expires_on", "contextSetId": "context_set"})
        else:
            # The token exists only in this response: it is never stored, flashed or put in a session.
            created = {"credential": credential, "token": token}
            form = CredentialForm(workspace=member.workspace)
    response = page(request, member, "pages/agent_access.html", {
        "form": form,
        "scope_options": _scope_options(member, form),
        "created": created,
        "credentials": _credential_rows(member),
        "agent_memories_enabled": member.workspace.ask_history.agent_memories_enabled,
    }, current="pages:agent-access")
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@member_page()
def agent_access_revoke(request: HttpRequest, member: Member, credential_id: str) -> HttpResponse:
    credential = Credential.objects.filter(workspace=member.workspace, member=member, pk=_int_id(credential_id)).first()
    if credential is None:
        raise Http404("No such credential.")
    governance_actions.revoke_credential(credential, actor=request.user)
    messages.success(request, _("Credential “%(name)s” revoked. Agents using it are refused from now on.") % {"name": credential.name})
    return redirect("pages:agent-access", member.workspace_id)


# --- Settings → Ask history (owner) --------------------------------------------------------------
def _agent_memory_counts(member: Member) -> dict[str, int]:
    agent_versions = MemoryVersion.objects.filter(workspace=member.workspace).exclude(namespace=ASSISTANT_NAMESPACE)
    return agent_versions.aggregate(
        versions=Count("id"),
        memories=Count("id", filter=Q(valid_to__isnull=True)),
        members=Count("member", distinct=True),
    )


def _receipt_rows(member: Member) -> list[dict[str, Any]]:
    rows = []
    for receipt in DeletionReceipt.objects.filter(workspace_ref=member.workspace_id).order_by("-purged_at", "-id")[:50]:
        artifacts = receipt.manifest.get("artifacts", {}) if isinstance(receipt.manifest, dict) else {}
        rows.append({
            "receipt": receipt,
            "operation_label": OPERATION_LABELS.get(receipt.operation, receipt.operation),
            "versions": int(artifacts.get("memory_version", 0)),
            "citations": int(artifacts.get("citation", 0)),
            "embeddings": int(artifacts.get("memory_embedding", 0)),
            "clean": bool(receipt.verification.get("clean")) if isinstance(receipt.verification, dict) else False,
            "backup_days": (receipt.residual.get("backups") or {}).get("retentionDays", 0) if isinstance(receipt.residual, dict) else 0,
        })
    return rows


@require_http_methods(["GET", "POST"])
@member_page("ask_history:manage")
def ask_history(request: HttpRequest, member: Member) -> HttpResponse:
    settings = member.workspace.ask_history
    initial = {
        "agent_memories_enabled": settings.agent_memories_enabled,
        "agent_memory_retention_days": settings.agent_memory_retention_days,
        "expired_grace_days": settings.expired_grace_days,
    }
    form = AskHistorySettingsForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            governance_actions.update_settings(member.workspace, {
                "agentMemoriesEnabled": data["agent_memories_enabled"],
                "agentMemoryRetentionDays": data["agent_memory_retention_days"],
                "expiredGraceDays": data["expired_grace_days"],
            }, actor=request.user)
        except ApiError as exc:
            add_api_error(form, exc)
        else:
            messages.success(request, _("Settings saved."))
            return redirect("pages:ask-history", member.workspace_id)
    return page(request, member, "pages/ask_history.html", {
        "form": form,
        "counts": _agent_memory_counts(member),
        "receipts": _receipt_rows(member),
    }, current="pages:ask-history")


@require_http_methods(["GET", "POST"])
@member_page("ask_history:manage")
def ask_history_delete_all(request: HttpRequest, member: Member) -> HttpResponse:
    if request.method == "POST":
        result = actions.delete_all_agent_memories(member.workspace, actor=request.user)
        versions = int(result["deleted"].get("memory_version", 0))
        if versions:
            messages.success(request, ngettext("Deleted every agent memory in the workspace (%(n)d version erased). Deletion receipts were recorded, one per member.", "Deleted every agent memory in the workspace (%(n)d versions erased). Deletion receipts were recorded, one per member.", versions) % {"n": versions})
        else:
            messages.info(request, _("There were no agent memories to delete."))
        return redirect("pages:ask-history", member.workspace_id)
    return page(request, member, "pages/ask_history_delete_all.html", {"counts": _agent_memory_counts(member)}, current="pages:ask-history")


# --- Usage ----------------------------------------------------------------------------------------
CHART_DAYS = 30
CHART_WIDTH, CHART_HEIGHT = 720, 200
CHART_LEFT, CHART_BOTTOM, CHART_TOP = 56, 28, 12


def _usage_lines(record: UsageRecord) -> list[dict[str, Any]]:
    if record.category == UsageCategory.AI_MEMORY:
        labels = (_("AI memory (input)"), _("AI memory (output)"))
    else:
        labels = (_("Reply (input)"), _("Reply (output)"))
    return [
        {"label": labels[0], "tokens": record.input_tokens, "cost": record.input_cost, "memory_tokens": record.memory_tokens},
        {"label": labels[1], "tokens": record.output_tokens, "cost": record.output_cost, "memory_tokens": 0},
    ]


def _nice_max(value: Decimal) -> Decimal:
    if value <= 0:
        return Decimal(1)
    magnitude = Decimal(10) ** (len(str(int(value))) - 1) if value >= 1 else Decimal("0.1") ** max(1, -value.adjusted())
    for step in (1, 2, 5, 10):
        if value <= magnitude * step:
            return magnitude * step
    return magnitude * 10


def usage_chart(queryset, today) -> dict[str, Any]:
    """Credits per day over the last 30 days, as SVG coordinates computed here (no script)."""
    start = today - timedelta(days=CHART_DAYS - 1)
    totals: dict[Any, Decimal] = defaultdict(Decimal)
    by_day = (
        queryset.filter(created_at__date__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(input=Sum("input_cost"), output=Sum("output_cost"))
    )
    for row in by_day:
        totals[row["day"]] += (row["input"] or Decimal(0)) + (row["output"] or Decimal(0))
    top = _nice_max(max(totals.values(), default=Decimal(0)))
    plot_w = CHART_WIDTH - CHART_LEFT - 8
    plot_h = CHART_HEIGHT - CHART_BOTTOM - CHART_TOP
    slot = plot_w / CHART_DAYS
    bars = []
    for i in range(CHART_DAYS):
        day = start + timedelta(days=i)
        value = totals.get(day, Decimal(0))
        height = float(value / top) * plot_h if top else 0
        bars.append({
            "x": round(CHART_LEFT + i * slot + slot * 0.15, 2),
            "y": round(CHART_TOP + plot_h - height, 2),
            "width": round(slot * 0.7, 2),
            "height": round(height, 2),
            "day": day,
            "value": value,
            "label_x": round(CHART_LEFT + i * slot + slot / 2, 2),
            "show_label": i % 5 == 0 or i == CHART_DAYS - 1,
        })
    grid = [{"y": round(CHART_TOP + plot_h - plot_h * f, 2), "value": top * Decimal(str(f))} for f in (0, 0.5, 1)]
    return {
        "bars": bars, "grid": grid, "width": CHART_WIDTH, "height": CHART_HEIGHT,
        "left": CHART_LEFT, "right": CHART_WIDTH - 8, "baseline": CHART_TOP + plot_h, "label_y": CHART_HEIGHT - 8,
        "total": sum(totals.values(), Decimal(0)), "start": start, "end": today,
    }


@require_GET
@member_page()
def usage(request: HttpRequest, member: Member) -> HttpResponse:
    sees_all = member.has_perm("usage:read_all")
    queryset = UsageRecord.objects.filter(workspace=member.workspace)
    if not sees_all:
        queryset = queryset.filter(member=member)
    records = list(queryset.select_related("member__user").order_by("-created_at", "-id")[:100])
    totals = queryset.aggregate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), input_cost=Sum("input_cost"), output_cost=Sum("output_cost"), count=Count("id"))
    totals["credits"] = (totals["input_cost"] or Decimal(0)) + (totals["output_cost"] or Decimal(0))
    rows = [{
        "record": r,
        "category_label": _("AI memory") if r.category == UsageCategory.AI_MEMORY else _("Assistant reply"),
        "lines": _usage_lines(r),
        "who": (r.member.user.email or r.member.user.username) if r.member_id else _("Former member"),
    } for r in records]
    return page(request, member, "pages/usage.html", {
        "rows": rows,
        "sees_all": sees_all,
        "totals": totals,
        "chart": usage_chart(queryset, timezone.localdate()) if records else None,
    }, current="pages:usage")
