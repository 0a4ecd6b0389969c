"""Health (`/healthz`: is each dependency answering?), readiness (`/readyz`: may this process
take traffic — migrations applied and the database answering) and the Prometheus metrics
(`/metrics`, behind `METRICS_TOKEN`; docs/operations.md lists every metric)."""

from __future__ import annotations

import hmac
import time

from celery import current_app
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from governance.auth import bearer_token
from memoryapp import metrics as prometheus


def _timed(check) -> dict:
    started = time.perf_counter()
    try:
        detail = check()
        return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 1), **(detail or {})}
    except Exception as exc:  # a health check reports failures, it never raises them
        return {"ok": False, "error": type(exc).__name__}


def _database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"vendor": connection.vendor}


def _redis() -> dict:
    if not settings.REDIS_URL:
        return {"configured": False}
    import redis

    redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2).ping()
    return {"configured": True}


def _broker() -> dict:
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return {"transport": conn.transport_cls if isinstance(conn.transport_cls, str) else type(conn.transport).__name__}


def healthz(request):
    checks = {"database": _timed(_database), "redis": _timed(_redis), "broker": _timed(_broker)}
    healthy = all(c["ok"] for c in checks.values())
    return JsonResponse({"status": "ok" if healthy else "degraded", "checks": checks}, status=200 if healthy else 503)


def readyz(request):
    def migrations() -> dict:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if pending:
            raise RuntimeError("migrations pending")
        return {}

    checks = {"database": _timed(_database), "migrations": _timed(migrations)}
    ready = all(c["ok"] for c in checks.values())
    return JsonResponse({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)


@require_GET
def metrics(request):
    """Off (404) without METRICS_TOKEN; 401 without the right bearer token, compared in constant time."""
    expected = settings.METRICS_TOKEN
    if not expected:
        raise Http404("Metrics are off: set METRICS_TOKEN.")
    presented = bearer_token(request.META.get("HTTP_AUTHORIZATION")) or ""
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        response = HttpResponse(
            "A valid metrics token is required.\n", status=401, content_type="text/plain; charset=utf-8"
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    response = HttpResponse(prometheus.exposition(), content_type=prometheus.CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    return response
