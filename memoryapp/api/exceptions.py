"""One exception handler renders every API error, DRF's own included, as the product's error shape."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core.errors import ApiError, error_body, plain_details
from core.unavailable import database_unavailable
from memoryapp.api.parsers import NotText

_DRF_CODES: list[tuple[type[Exception], int, str]] = [
    (drf.NotAuthenticated, 401, "UNAUTHENTICATED"),
    (drf.AuthenticationFailed, 401, "UNAUTHENTICATED"),
    (drf.PermissionDenied, 403, "FORBIDDEN"),
    (drf.NotFound, 404, "NOT_FOUND"),
    (drf.MethodNotAllowed, 405, "METHOD_NOT_ALLOWED"),
    (drf.NotAcceptable, 406, "NOT_ACCEPTABLE"),
    (drf.UnsupportedMediaType, 415, "UNSUPPORTED_MEDIA_TYPE"),
    (drf.Throttled, 429, "THROTTLED"),
    (drf.ParseError, 400, "VALIDATION_ERROR"),
]


def body_error(exc: drf.ParseError | drf.UnsupportedMediaType) -> ApiError:
    """A body that could not be read, as the product's error (the agent API raises it at gate
    row 6, after the credential checks; every other API at once)."""
    if isinstance(exc, drf.UnsupportedMediaType):
        return ApiError(415, "UNSUPPORTED_MEDIA_TYPE", "Send the body as application/json.")
    if isinstance(exc, NotText):
        return ApiError(400, "VALIDATION_ERROR", "The request is not valid.", {"fields": exc.fields})
    return ApiError(
        400,
        "VALIDATION_ERROR",
        "The request is not valid.",
        {"fields": {"non_field_errors": ["The body is not valid JSON."]}},
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, NotText):
        exc = body_error(exc)
    exc = database_unavailable(exc) or exc  # a pool timeout, a lost connection, a lock: 503, retry
    if isinstance(exc, ApiError):
        return Response(exc.as_json(), status=exc.status, headers=exc.headers)
    if isinstance(exc, Http404):
        return Response(error_body("NOT_FOUND", "Not found."), status=404)
    if isinstance(exc, DjangoPermissionDenied):
        return Response(error_body("FORBIDDEN", "You may not do this."), status=403)
    if isinstance(exc, drf.ValidationError):
        detail = plain_details(exc.detail)
        fields = detail if isinstance(detail, dict) else {"non_field_errors": detail}
        return Response(error_body("VALIDATION_ERROR", "The request is not valid.", {"fields": fields}), status=400)
    for exc_type, status, code in _DRF_CODES:
        if isinstance(exc, exc_type):
            headers = {}
            if isinstance(exc, drf.Throttled) and exc.wait:
                headers["Retry-After"] = str(int(exc.wait) + 1)
            if status == 401:
                headers["WWW-Authenticate"] = "Bearer, Token"
            message = str(exc.detail) if isinstance(exc, drf.APIException) else str(exc)
            if isinstance(exc, drf.ParseError):
                message = "The body is not valid JSON."
            return Response(error_body(code, message), status=status, headers=headers)
    return None
