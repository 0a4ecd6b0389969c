"""MCP server (SPEC §6, §4.6): four tools whose arguments are the REST bodies.

- `memoryapp.mcp.fence`: the untrusted header and the `<memory>` fence a model reads;
- `memoryapp.mcp.schemas`: the tools' input schemas (the REST serializers) and descriptions;
- `memoryapp.mcp.tools`: the operations over `gates.admit` and the actions, and the server;
- `memoryapp.mcp.transport`: streamable HTTP at `/mcp` and the project's ASGI routing.

Transports: stdio (`manage.py mcp_server`, token from `AGENT_MEMORY_TOKEN`) and streamable HTTP at
`/mcp` (`config.asgi`). The public entry points are re-exported here."""

from memoryapp.mcp.fence import UNTRUSTED_HEADER, fence, fence_escape, render_text
from memoryapp.mcp.schemas import DESCRIPTIONS, TOOLS, field_schema, input_schema
from memoryapp.mcp.tools import (
    OPERATIONS,
    SERVER_NAME,
    build_server,
    error_result,
    fixed_token,
    request_bearer_token,
    run_operation,
    run_tool_call,
)
from memoryapp.mcp.transport import MCPHttpApp, is_mcp_path, transport_security, with_mcp

__all__ = [
    "DESCRIPTIONS",
    "MCPHttpApp",
    "OPERATIONS",
    "SERVER_NAME",
    "TOOLS",
    "UNTRUSTED_HEADER",
    "build_server",
    "error_result",
    "fence",
    "fence_escape",
    "field_schema",
    "fixed_token",
    "input_schema",
    "is_mcp_path",
    "render_text",
    "request_bearer_token",
    "run_operation",
    "run_tool_call",
    "transport_security",
    "with_mcp",
]
