"""Request-level guards that must hold before any view runs."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from functools import cache
from urllib.parse import parse_qs

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from core import logs
from core.errors import error_body
from governance import login_throttle
from memoryapp import metrics

_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
# The agent REST routes (config.urls) and the operation each one is.
AGENT_ROUTES = {"agent-remember": "remember", "agent-recall": "recall", "agent-list": "list", "agent-forget": "forget"}


def error_response(status: int, code: str, message: str, details: dict | None = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, details), status=status)


@cache
def login_paths() -> frozenset[str]:
    return frozenset({reverse("pages:login"), reverse("admin:login")})


def _login_username(body: bytes) -> str:
    """The username a log-in form posts (application/x-www-form-urlencoded), or ""."""
    values = parse_qs(body.decode("latin-1"), encoding="utf-8", errors="replace").get("username")
    return values[0] if values else ""


def login_slowdown(app):
    """The account-wide log-in slow-down (`governance.login_throttle`) for the ASGI application:
    a log-in attempt on an account that failed often, from any address, waits before Django sees
    it. It wraps the whole ASGI application rather than sitting in MIDDLEWARE because Django runs
    an async-capable middleware in a thread whenever the one below it is synchronous, and there a
    wait would hold a thread every synchronous view of the process shares. The body is read here
    (at most MAX_REQUEST_BODY_BYTES; past that nothing waits and Django answers 413) and handed
    on to Django unchanged."""

    async def application(scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in login_paths():
            return await app(scope, receive, send)
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body") or len(body) > settings.MAX_REQUEST_BODY_BYTES:
                break
        if len(body) <= settings.MAX_REQUEST_BODY_BYTES and messages[-1]["type"] == "http.request":
            delay = await login_throttle.apending_delay(_login_username(body))
            if delay:
                await login_throttle.asleep(delay)
        replayed = iter(messages)

        async def replay():
            return next(replayed, None) or await receive()

        return await app(scope, replay, send)

    return application


class LoginSlowdownMiddleware:
    """The same slow-down where Django is served over WSGI (and in Django's test client): the
    attempt waits in the worker's own thread, as every request of a WSGI worker does. Under ASGI
    `login_slowdown` has already waited, so an ASGI request passes straight through."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in login_paths() and not isinstance(request, ASGIRequest):
            try:
                username = str(request.POST.get("username") or "")
            except (RequestDataTooBig, TooManyFieldsSent):
                return self.get_response(request)  # the body-size guard below answers it
            delay = login_throttle.pending_delay(username)
            if delay:
                login_throttle.sleep(delay)
        return self.get_response(request)


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
            return error_response(
                413, "PAYLOAD_TOO_LARGE", f"Request bodies are limited to {limit} bytes.", {"limit": limit}
            )
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """A strict content-security policy: pages ship their own stylesheet and script, nothing else."""

    POLICY = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
        "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
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


def route_name(request: HttpRequest) -> str:
    """The route a request matched, by name (or, unnamed, by its pattern), never its path: a
    path holds ids and, on a 404, whatever the client typed."""
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return match.view_name if match.url_name else match.route or "unnamed"
    if request.path.startswith(settings.STATIC_URL):
        return "static"
    return "unmatched"


def error_code(response: HttpResponse) -> str:
    """`OK`, the product's error code from the JSON error body, or `HTTP_<status>`."""
    if response.status_code < 400:
        return "OK"
    body = getattr(response, "data", None)  # a DRF Response, not yet parsed back
    if (
        body is None
        and not response.streaming
        and response.get("Content-Type", "").startswith("application/json")
        and len(response.content) <= 65536
    ):
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
    code = body.get("error", {}).get("code") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else f"HTTP_{response.status_code}"


class RequestLogMiddleware:
    """One JSON line and the request metrics per request, and the request id: a sane
    `X-Request-ID` from the client is kept, anything else replaced; the response echoes it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request_id = logs.sane_request_id(request.headers.get("X-Request-ID"))
        with logs.scope(request_id=request_id) as fields:
            response = self.get_response(request)
            seconds = time.perf_counter() - started
            route, code = route_name(request), error_code(response)
            metrics.observe_request(route, request.method or "", response.status_code, code, seconds)
            if route in AGENT_ROUTES:
                metrics.observe_agent_operation(AGENT_ROUTES[route], "rest", code, seconds)
            match = getattr(request, "resolver_match", None)
            workspace_id = fields.get("workspace_id") or (match.kwargs.get("ws_id") if match else None)
            logs.request_line(
                request_id=request_id,
                transport="http",
                route=route,
                method=request.method or "",
                status=response.status_code,
                code=code,
                seconds=seconds,
                credential_id=fields.get("credential_id"),
                workspace_id=workspace_id,
            )
        response["X-Request-ID"] = request_id
        return response


__all__ = [
    "BodySizeLimitMiddleware",
    "RequestLogMiddleware",
    "SecurityHeadersMiddleware",
    "error_code",
    "error_response",
    "route_name",
]
