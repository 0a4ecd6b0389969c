"""What a request gets when no view answers it: the product's JSON error under `/api/` and `/mcp`,
the page otherwise. No route: 404 (SPEC §2: an id that is no id, in any path, answers 404, never
500). An exception no view handled (Django calls `server_error` inside its `except`): 503
SERVICE_UNAVAILABLE with `Retry-After` when the database cannot serve now (a pool timeout, a lost
connection, a lock, core.unavailable), else 500; the page for them needs no database."""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

from core.errors import error_body
from core.unavailable import database_unavailable

API_PREFIXES = ("/api/", "/mcp")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith(API_PREFIXES):
        return JsonResponse(error_body("NOT_FOUND", "Not found."), status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    unavailable = database_unavailable(sys.exc_info()[1])
    if unavailable is not None:
        if request.path.startswith(API_PREFIXES):
            response = JsonResponse(unavailable.as_json(), status=503)
        else:
            response = HttpResponse(render_to_string("503.html"), status=503)
        for name, value in unavailable.headers.items():
            response[name] = value
        return response
    if request.path.startswith(API_PREFIXES):
        return JsonResponse(error_body("INTERNAL_ERROR", "The request failed unexpectedly."), status=500)
    return defaults.server_error(request)
