"""The entry point: the first workspace of the caller, or the page that says they have none."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from governance.models import Member


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("pages:login")
    first = Member.objects.active().filter(user=request.user).order_by("workspace_id").first()
    if first is None:
        return render(request, "pages/no_workspace.html", status=200)
    return redirect("pages:ai-memory", first.workspace_id)
