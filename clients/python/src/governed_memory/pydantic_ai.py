"""The four memory operations as pydantic-ai tools.

    pip install './clients/python[pydantic-ai]'      # from the project's checkout

    from pydantic_ai import Agent
    from governed_memory import AsyncMemoryClient
    from governed_memory.pydantic_ai import memory_tools
    agent = Agent("openai:gpt-5", tools=memory_tools(AsyncMemoryClient()))

`remember_memory`, `recall_memories`, `list_memories`, `forget_memory`, as on the MCP server:
`Tool.from_schema` with the REST bodies' JSON schemas (from `/api/schema/`, governed_memory.tools),
so the arguments reach the server as sent and the server validates them; the return value is the
MCP text (memories fenced as untrusted notes); a refusal raises `ToolFailed` with
`Error <CODE> (HTTP <status>): …`, which pydantic-ai hands to the model as a failed tool result
(no retry prompt, no retry budget used). Transport failures raise and fail the run.
"""

from __future__ import annotations

from typing import Any

try:
    from pydantic_ai import Tool
    from pydantic_ai.exceptions import ToolFailed
except ImportError as exc:  # pragma: no cover - exercised by installing without the extra
    raise ImportError(
        "governed_memory.pydantic_ai needs pydantic-ai: pip install './clients/python[pydantic-ai]' (from the "
        "project's checkout)"
    ) from exc

from governed_memory.client import AsyncMemoryClient, MemoryClient
from governed_memory.tools import TOOLS, ToolRefusal, arun_tool, tool_spec


def memory_tool(client: AsyncMemoryClient | MemoryClient, operation: str) -> Tool:
    spec = tool_spec(operation)

    async def call(**arguments: Any) -> str:
        try:
            return await arun_tool(client, operation, arguments)
        except ToolRefusal as refusal:
            raise ToolFailed(refusal.text) from refusal

    call.__name__ = spec["name"]
    return Tool.from_schema(call, name=spec["name"], description=spec["description"], json_schema=spec["parameters"])


def memory_tools(client: AsyncMemoryClient | MemoryClient) -> list[Tool]:
    """The four tools over one client (a sync client runs in a worker thread)."""
    return [memory_tool(client, operation) for operation in TOOLS]
