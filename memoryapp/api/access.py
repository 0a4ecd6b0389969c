"""The access log and the export (SPEC §8.1): `GET …/ask-history/access-log` and `GET …/me/export`.

- The access log: every member sees their own entries (filters, signed cursor). `scope=workspace`
  (owners, `ask_history:manage`) answers counts per day for the whole workspace instead: never
  which memories, never a credential's name (the member wrote it), never who.
- The export: one JSON document, streamed, documented by `docs/export.schema.json` (served at
  `/api/schema/export.json` and embedded in the OpenAPI schema) and `docs/export.md`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse, StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import validation_error
from core.params import parse_id, query_int
from governance.api.base import WorkspaceAPIView
from memoryapp import access_log, export
from memoryapp.models import AccessOperation

SCHEMA_FILE = Path(settings.BASE_DIR) / "docs" / "export.schema.json"


# --- the schema of the export ----------------------------------------------------------------------
@cache
def export_json_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def as_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema (2020-12) as an OpenAPI 3.0 schema object: `$defs` references inlined,
    `type: [T, "null"]` as `nullable`, `const` as a one-value enum."""
    defs = schema.get("$defs", {})

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = convert(copy.deepcopy(defs[node["$ref"].removeprefix("#/$defs/")]))
            extra = {k: convert(v) for k, v in node.items() if k != "$ref"}
            return {**target, **extra}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$schema", "$id", "$defs"):
                continue
            if key == "type" and isinstance(value, list):
                types = [t for t in value if t != "null"]
                out["type"] = types[0]
                if len(types) < len(value):
                    out["nullable"] = True
            elif key == "const":
                out["enum"] = [value]
            elif key == "properties":
                out[key] = {name: convert(sub) for name, sub in value.items()}
            else:
                out[key] = convert(value)
        return out

    return convert(schema)


class ExportSchemaView(APIView):
    """The export's JSON Schema, as documented in docs/export.md (public: it describes a format)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT}, summary="JSON Schema of the member export (docs/export.schema.json)"
    )
    def get(self, request: Request):
        return FileResponse(SCHEMA_FILE.open("rb"), content_type="application/schema+json")


# --- the export ---------------------------------------------------------------------------------
def stream(request: Request, chunks: Iterator[str]) -> Iterator[bytes] | AsyncIterator[bytes]:
    """The chunks as the server consumes them without buffering: a plain iterator under WSGI; an
    async iterator under ASGI (uvicorn), each chunk produced in the request's own sync thread,
    where its database connection lives (Django would otherwise read a sync iterator whole)."""
    encoded = (chunk.encode("utf-8") for chunk in chunks)
    if not isinstance(request._request, ASGIRequest):
        return encoded
    done = object()
    step = sync_to_async(next, thread_sensitive=True)

    async def chunks_async() -> AsyncIterator[bytes]:
        while (part := await step(encoded, done)) is not done:
            yield part

    return chunks_async()


class ExportView(WorkspaceAPIView):
    @extend_schema(
        responses={
            200: OpenApiResponse(
                as_openapi(export_json_schema()),
                description="One JSON document with everything the workspace keeps about you; schema also at "
                "/api/schema/export.json, explained in docs/export.md.",
            )
        },
        summary="Export everything kept about me in this workspace (streamed JSON)",
    )
    def get(self, request: Request, ws_id: int):
        chunks = export.start_export(self.member, actor=request.user)
        response = StreamingHttpResponse(stream(request, chunks), content_type="application/json; charset=utf-8")
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = (
            f'attachment; filename="memory-export-w{self.workspace.pk}-m{self.member.pk}-{stamp}.json"'
        )
        response["Cache-Control"] = "no-store"
        return response


# --- the access log -----------------------------------------------------------------------------
def _day(params, name: str) -> date | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        parsed = date.fromisoformat(raw) if len(raw) == 10 else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.year < 2 or parsed.year > 9998:
        raise validation_error({name: ["Must be a date, YYYY-MM-DD."]})
    return parsed


def _instant(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


class AccessLogView(WorkspaceAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "scope",
                str,
                required=False,
                enum=["member", "workspace"],
                description="workspace: counts per day for the whole workspace (ask_history:manage)",
            ),
            OpenApiParameter("credential", str, required=False, description="a credential id (your own entries only)"),
            OpenApiParameter("operation", str, required=False, enum=list(AccessOperation.values)),
            OpenApiParameter("from", str, required=False, description="first day, YYYY-MM-DD (UTC), inclusive"),
            OpenApiParameter("to", str, required=False, description="last day, YYYY-MM-DD (UTC), inclusive"),
            OpenApiParameter("limit", int, required=False),
            OpenApiParameter("cursor", str, required=False, description="nextCursor of the previous page"),
        ],
        responses={200: OpenApiTypes.OBJECT},
        summary="Access log: which agent read which of your memories (or, for owners, counts per day)",
    )
    def get(self, request: Request, ws_id: int):
        params = request.query_params
        scope = params.get("scope") or "member"
        if scope not in ("member", "workspace"):
            raise validation_error({"scope": ["One of member, workspace."]})
        operation = params.get("operation") or None
        if operation is not None and operation not in AccessOperation.values:
            raise validation_error({"operation": [f"One of {', '.join(AccessOperation.values)}."]})
        since, until = _day(params, "from"), _day(params, "to")
        if since and until and since > until:
            raise validation_error({"from": ["Must not be after to."]})
        if scope == "workspace":
            member_only = [name for name in ("credential", "cursor") if params.get(name)]
            return Response(
                access_log.daily_counts_for(
                    self.member, since=since, until=until, operation=operation, member_only=member_only
                )
            )
        credential_id = None
        if params.get("credential"):
            credential_id = parse_id(params["credential"])
            if credential_id is None:
                raise validation_error({"credential": ["Not a credential id."]})
        filters = access_log.EntryFilters(
            credential_id=credential_id,
            operation=operation,
            since=_instant(since) if since else None,
            until=_instant(until + timedelta(days=1)) if until else None,
        )
        limit = query_int(params, "limit", default=20, minimum=1, maximum=100)
        entries, next_cursor = access_log.page_of(
            access_log.member_entries(self.member, filters), self.member, limit=limit, cursor=params.get("cursor")
        )
        visible, hidden = access_log.readable_versions(self.member, entries)
        return Response(
            {
                "scope": "member",
                "retentionDays": settings.ACCESS_LOG_RETENTION_DAYS,
                "entries": [access_log.entry_json(entry, visible, hidden) for entry in entries],
                "nextCursor": next_cursor,
            }
        )
