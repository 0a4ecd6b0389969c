"""Request-level guards that must hold before any view runs."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from memoryapp.errors import error_body


def error_response(status: int, code: str, message: str, details: dict | None = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, details), status=status)


class BodySizeLimitMiddleware:
    """Bodies over 64 KiB answer 413 before anything reads them (SPEC §2)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.MAX_REQUEST_BODY_BYTES
        length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            declared = int(length)
        except ValueError:
            return error_response(400, "VALIDATION_ERROR", "Content-Length is not a number.")
        if declared > limit:
            return error_response(413, "PAYLOAD_TOO_LARGE", f"Request bodies are limited to {limit} bytes.", {"limit": limit})
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """A strict content-security policy: pages ship their own stylesheet and script, nothing else."""

    POLICY = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(("/api/docs", "/admin/")):
            response.headers.setdefault("Content-Security-Policy", self.POLICY)
        response.headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
        response.headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
        return response


__all__ = ["BodySizeLimitMiddleware", "SecurityHeadersMiddleware", "error_response"]
