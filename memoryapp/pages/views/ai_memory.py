"""AI memory (SPEC §7): the member's assistant memories, the remember-me switch, add, edit, delete
(a confirmation page) and reactivate an expired one.

Editing changes the type, topic, summary and details. The topic is the key of the memory's
version chain, so a new topic moves the memory (`assistant.edit_assistant_memory`): a new
version under the new topic, the old topic's chain closed."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import ApiError
from governance import actions as governance_actions
from governance.models import Member
from memoryapp import actions, assistant
from memoryapp.models import MemoryVersion
from memoryapp.pages import presenters
from memoryapp.pages.forms import AssistantMemoryEditForm, AssistantMemoryForm
from memoryapp.pages.presenters import error_text, masked_note
from memoryapp.pages.views.base import add_api_error, member_page, page


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
            "writable": assistant.assistant_memories_writable(member),
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
        messages.warning(
            request,
            _("%(verb)s Personal data was masked before saving: %(kinds)s.")
            % {"verb": verb, "kinds": masked_note(version.masked_kinds)},
        )
    else:
        messages.success(request, verb)


@require_http_methods(["GET", "POST"])
@member_page()
def ai_memory_add(request: HttpRequest, member: Member) -> HttpResponse:
    form = AssistantMemoryForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version, superseded = assistant.add_assistant_memory(
                member, kind=data["kind"], topic=data["topic"], summary=data["summary"], details=data["details"]
            )
        except ApiError as exc:
            add_api_error(form, exc, {"key": "topic", "text": "summary"})
        else:
            _saved_message(
                request,
                version,
                _("Memory updated: the topic already existed, so a new version was saved.")
                if superseded
                else _("Memory saved."),
            )
            return redirect(
                reverse("pages:ai-memory", args=[member.workspace_id]) + f"?saved={version.pk}#memory-{version.pk}"
            )
    return page(
        request,
        member,
        "pages/ai_memory_form.html",
        {"form": form, "editing": None, "writable": assistant.assistant_memories_writable(member)},
        current="pages:ai-memory",
    )


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
    initial = {
        "kind": item["kind"] or "fact",
        "topic": item["topic"],
        "summary": item["summary"],
        "details": "\n".join(item["details"]),
    }
    form = AssistantMemoryEditForm(request.POST or None, initial=initial, current_kind=item["kind"] or "")
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = assistant.edit_assistant_memory(
                member,
                int(item["id"]),
                kind=data["kind"],
                summary=data["summary"],
                details=data["details"],
                topic=data["topic"],
            )
        except ApiError as exc:
            add_api_error(form, exc, {"key": "topic", "text": "summary"})
        else:
            moved = data["topic"] != item["topic"]
            _saved_message(
                request,
                version,
                _("Memory moved to the new topic; the old topic is closed.") if moved else _("Memory updated."),
            )
            return redirect(
                reverse("pages:ai-memory", args=[member.workspace_id]) + f"?saved={version.pk}#memory-{version.pk}"
            )
    return page(
        request,
        member,
        "pages/ai_memory_form.html",
        {
            "form": form,
            "editing": presenters.assistant_rows([item])[0],
            "writable": assistant.assistant_memories_writable(member),
        },
        current="pages:ai-memory",
    )


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
    return page(
        request,
        member,
        "pages/ai_memory_delete.html",
        {"memory": presenters.assistant_rows([item])[0]},
        current="pages:ai-memory",
    )


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
