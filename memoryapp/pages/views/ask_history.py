"""Settings → Ask history (SPEC §7, owners): the workspace's settings, with a retention change
previewed first (the confirmation step shows the counts the owner confirms), and the owner's
delete of every agent memory in the workspace (a confirmation page, acting only on POST)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods

from core.errors import ApiError
from governance.models import AskHistorySettings, Member
from memoryapp import actions
from memoryapp.pages import presenters
from memoryapp.pages.forms import AskHistorySettingsForm
from memoryapp.pages.views.base import add_api_error, member_page, page
from retention import previews as retention_previews

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
        result = retention_previews.save_settings_or_ask_confirmation(
            member.workspace, changes, actor=request.user, confirmed=confirmed, confirmed_plan=plan
        )
        if result["needsConfirmation"]:
            return _ask_history_confirm(request, member, changes, result["manifest"], result["planToken"])
    except ApiError as exc:
        if exc.code == retention_previews.PREVIEW_OUTDATED:
            return _ask_history_confirm(
                request, member, changes, exc.details["manifest"], exc.details["planToken"], outdated=True
            )
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
            ngettext(
                "%(n)s assistant memory moved to Expired.",
                "%(n)s assistant memories moved to Expired.",
                applied["assistantExpired"],
            )
            % {"n": presenters.number(applied["assistantExpired"])},
        )
    if applied and applied["assistantRestored"]:
        messages.info(
            request,
            ngettext(
                "%(n)s expired assistant memory was brought back.",
                "%(n)s expired assistant memories were brought back.",
                applied["assistantRestored"],
            )
            % {"n": presenters.number(applied["assistantRestored"])},
        )
    return redirect("pages:ask-history", member.workspace_id)


def _ask_history_confirm(
    request: HttpRequest,
    member: Member,
    changes: dict[str, Any],
    manifest: dict[str, Any],
    token: str,
    *,
    outdated: bool = False,
) -> HttpResponse:
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
            result = actions.delete_all_agent_memories(
                member.workspace, actor=request.user, confirmed=request.POST.get("planToken", "")
            )
        except ApiError as exc:
            if exc.code != retention_previews.PREVIEW_OUTDATED:
                raise
            return _owner_delete_all_confirm(
                request, member, exc.details["manifest"], exc.details["planToken"], outdated=True
            )
        versions = int(result["deleted"].get("memory_version", 0))
        if versions:
            messages.success(
                request,
                ngettext(
                    "Deleted every agent memory in the workspace (%(n)d version erased). Deletion receipts were "
                    "recorded, one per member.",
                    "Deleted every agent memory in the workspace (%(n)d versions erased). Deletion receipts were "
                    "recorded, one per member.",
                    versions,
                )
                % {"n": versions},
            )
        else:
            messages.info(request, _("There were no agent memories to delete."))
        return redirect("pages:ask-history", member.workspace_id)
    preview = actions.delete_all_agent_memories(member.workspace, actor=request.user, dry_run=True)
    return _owner_delete_all_confirm(request, member, preview["manifest"], preview["planToken"])


def _owner_delete_all_confirm(
    request: HttpRequest, member: Member, manifest: dict[str, Any], token: str, *, outdated: bool = False
) -> HttpResponse:
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
