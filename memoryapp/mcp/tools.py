"""The four tools (SPEC §6): each hands its arguments, unparsed, to the same gate (`gates.admit`)
and the same actions as the REST views, so validation, refusals and results cannot drift: the
structured content is the REST JSON, and a refusal is a tool error carrying the REST code,
message and details. `build_server(token_for)` builds the server for either transport; only the
token source differs."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult, TextContent

from core import logs
from core.errors import ApiError
from core.unavailable import database_unavailable
from governance.auth import bearer_token
from memoryapp import actions, gates, metrics, reads
from memoryapp.mcp.fence import UNTRUSTED_HEADER, fence_escape, render_text
from memoryapp.mcp.schemas import TOOLS, input_schema
from memoryapp.models import AccessSurface

logger = logging.getLogger(__name__)

SERVER_NAME = "governed-agent-memory"

TokenSource = Callable[[Context], str | None]


# --- the operations ------------------------------------------------------------------------------
def _remember(admission: gates.Admission) -> tuple[dict[str, Any], str]:
    result = actions.remember(admission)
    body = {"memory": result.json, "superseded": result.superseded}
    summary = (
        f"Remembered 1 memory (superseded {result.superseded} earlier version{'s' if result.superseded != 1 else ''})."
    )
    return body, render_text(summary, [result.json])


def _recall(admission: gates.Admission) -> tuple[dict[str, Any], str]:
    body = reads.recall_memories(admission, surface=AccessSurface.MCP).body
    degraded = ", ".join(body.get("degraded") or []) or "none"
    summary = (
        f"Recalled {len(body['memories'])} memories, best first (considered {body['considered']}, "
        f"hidden {body['hidden']}, degraded rankings: {degraded})."
    )
    return body, render_text(summary, body["memories"])


def _list(admission: gates.Admission) -> tuple[dict[str, Any], str]:
    body = reads.list_memories(admission, surface=AccessSurface.MCP).body
    more = (
        f' More: call list_memories again with cursor "{fence_escape(body["nextCursor"], attribute=True)}".'
        if body.get("nextCursor")
        else ""
    )
    summary = f"Listed {len(body['memories'])} memories, newest first (hidden {body['hidden']}).{more}"
    return body, render_text(summary, body["memories"])


def _forget(admission: gates.Admission) -> tuple[dict[str, Any], str]:
    body = actions.forget(admission)
    summary = f"Forgot {body['forgotten']} memory version(s); deletion receipt {body['receiptId']}."
    return body, render_text(summary, [])


OPERATIONS: dict[str, Callable[[gates.Admission], tuple[dict[str, Any], str]]] = {
    "remember": _remember,
    "recall": _recall,
    "list": _list,
    "forget": _forget,
}


def error_result(error: ApiError) -> CallToolResult:
    logs.bind(status=error.status)  # the REST status this refusal would have had, for the call's log line
    details = f" Details: {json.dumps(error.details, ensure_ascii=False, sort_keys=True)}" if error.details else ""
    text = f"Error {error.code} (HTTP {error.status}): {error.message}{details}"
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=error.as_json(), is_error=True
    )


def run_operation(token: str | None, operation: str, arguments: Any) -> CallToolResult:
    """The whole call, synchronously: gate rows 1–10, then the action (rows 11–12 and the write),
    with its log line and metrics."""
    started = time.perf_counter()
    with logs.scope(request_id=logs.new_request_id()) as fields:
        result = _run_operation(token, operation, arguments)
        observe_tool_call(operation, result, time.perf_counter() - started, fields)
    return result


def _run_operation(token: str | None, operation: str, arguments: Any) -> CallToolResult:
    try:
        body, text = OPERATIONS[operation](gates.admit(token, operation, arguments))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body)
    except ApiError as error:
        return error_result(error)
    except Exception as exc:
        if unavailable := database_unavailable(exc):
            logger.warning("MCP %s: the database cannot serve now (%s)", operation, type(exc).__name__)
            return error_result(unavailable)
        # The message may quote stored values (a database error can), so only the type and frames are logged.
        logger.error(
            "MCP %s failed with %s\n%s", operation, type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__))
        )
        return error_result(ApiError(500, "INTERNAL_ERROR", "The operation failed unexpectedly."))


def run_tool_call(token: str | None, operation: str, arguments: Any) -> CallToolResult:
    """`run_operation` as one request of a long-lived process: like Django's request signals,
    drop connections that died or outlived CONN_MAX_AGE before and after."""
    close_old_connections()
    try:
        return run_operation(token, operation, arguments)
    finally:
        close_old_connections()


def observe_tool_call(operation: str, result: CallToolResult, seconds: float, fields: dict[str, Any]) -> None:
    """The MCP counterpart of the REST request line and metrics (memoryapp.middleware)."""
    error = (result.structured_content or {}).get("error") if result.is_error else None
    code = error.get("code", "INTERNAL_ERROR") if isinstance(error, dict) else "OK"
    metrics.observe_agent_operation(operation, "mcp", code, seconds)
    logs.request_line(
        request_id=fields["request_id"],
        transport="mcp",
        route=f"mcp:{operation}",
        method="CALL",
        status=int(fields.get("status", 200)),
        code=code,
        seconds=seconds,
        credential_id=fields.get("credential_id"),
        workspace_id=fields.get("workspace_id"),
    )


# --- the server ----------------------------------------------------------------------------------
class BodyTool(Tool):
    """A tool whose arguments reach the REST serializer untouched: the SDK's own argument model
    would refuse or coerce some bodies differently, and the gate order (credential before body)
    would be lost."""

    async def run(self, arguments: dict[str, Any], context: Context, convert_result: bool = False) -> Any:
        return await self.fn(arguments, context)


def _no_arguments() -> None: ...


def make_tool(operation: str, token_for: TokenSource) -> BodyTool:
    spec = TOOLS[operation]

    async def call(arguments: dict[str, Any], ctx: Context) -> CallToolResult:
        token = token_for(ctx)  # read per call: an HTTP token is never cached across requests
        return await sync_to_async(run_tool_call, thread_sensitive=True)(token, operation, arguments)

    return BodyTool(
        fn=call,
        name=spec["name"],
        title=spec["title"],
        description=spec["description"],
        parameters=input_schema(operation),
        fn_metadata=func_metadata(_no_arguments, structured_output=False),
        is_async=True,
        context_kwarg=None,
        annotations=spec["annotations"],
    )


def build_server(token_for: TokenSource) -> MCPServer:
    return MCPServer(
        SERVER_NAME,
        title="Governed agent memory",
        instructions=(
            "Tools to remember, recall, list and forget short notes about the workspace member this credential acts "
            "for. " + UNTRUSTED_HEADER
        ),
        tools=[make_tool(operation, token_for) for operation in TOOLS],
        log_level="WARNING",
    )


def fixed_token(token: str) -> TokenSource:
    """stdio: one process, one credential, read from the environment once at start."""
    return lambda ctx: token


def request_bearer_token(ctx: Context) -> str | None:
    """HTTP: the Authorization header of the very request that carries this tool call."""
    headers = ctx.headers
    return bearer_token(headers.get("authorization")) if headers is not None else None
