"""Settings → Agent access (SPEC §7): the member's credentials, creating one and revoking one.

A new credential's token is rendered in the response to the POST itself (with
`Cache-Control: no-store`) instead of POST → redirect: a redirect would have to park the token in
the session, the messages cookie or the database, and it must live nowhere but that one page."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import ApiError
from core.timestamps import InvalidInstant, end_of_day
from governance import actions as governance_actions
from governance.models import Credential, Member
from memoryapp.pages import presenters
from memoryapp.pages.forms import CredentialForm
from memoryapp.pages.views.base import add_api_error, member_page, page


@require_http_methods(["GET", "POST"])
@member_page()
def agent_access(request: HttpRequest, member: Member) -> HttpResponse:
    form = CredentialForm(request.POST or None, workspace=member.workspace)
    created = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            expires_at = end_of_day(data["expires_on"]) if data["expires_on"] else None
            credential, token = governance_actions.create_credential(
                member, name=data["name"], scopes=data["scopes"], context_set=data["context_set"], expires_at=expires_at
            )
        except InvalidInstant as exc:
            form.add_error("expires_on", str(exc))
        except ApiError as exc:
            add_api_error(form, exc, {"expiresAt": "expires_on", "contextSetId": "context_set"})
        else:
            # The token exists only in this response: it is never stored, flashed or put in a session.
            created = {
                "credential": credential,
                "token": token,
                "snippet": presenters.connection_snippet(request, token),
            }
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
    credential = Credential.objects.restrict(member, "view").filter(pk=credential_id).first()
    if credential is None:
        raise Http404("No such credential.")
    governance_actions.revoke_credential(credential, actor=request.user)
    messages.success(
        request,
        _("Credential “%(name)s” revoked. Agents using it are refused from now on.") % {"name": credential.name},
    )
    return redirect("pages:agent-access", member.workspace_id)
