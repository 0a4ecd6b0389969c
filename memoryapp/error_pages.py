"""What a request that matches no route gets: the product's JSON error under `/api/`, the page
otherwise (SPEC §2: an id that is no id, in any path, answers 404, never 500)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from core.errors import error_body

API_PREFIXES = ("/api/", "/mcp")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith(API_PREFIXES):
        return JsonResponse(error_body("NOT_FOUND", "Not found."), status=404)
    return defaults.page_not_found(request, exception)
