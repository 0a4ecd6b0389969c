"""What every page shares: the workspace resolver (`member_page`: logged in, an active member,
holding the permission), the page frame, and an action's refusal placed on its form."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _

from core.errors import ApiError
from governance.auth import MembershipRestarted, active_membership
from governance.models import Member
from memoryapp.pages import presenters
from memoryapp.pages.presenters import error_text


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


def page(
    request: HttpRequest, member: Member, template: str, context: dict[str, Any], *, current: str, status: int = 200
) -> HttpResponse:
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
