"""The four memory operations as OpenAI Agents SDK function tools.

    pip install './clients/python[openai-agents]'      # from the project's checkout

    from agents import Agent
    from governed_memory import AsyncMemoryClient
    from governed_memory.openai_agents import memory_tools
    agent = Agent(name="assistant", tools=memory_tools(AsyncMemoryClient()))

`remember_memory`, `recall_memories`, `list_memories`, `forget_memory`, as on the MCP server:
the arguments are the REST bodies (their JSON schemas from `/api/schema/`, governed_memory.tools),
the output is the MCP text (memories fenced as untrusted notes), and a refusal comes back to the
model as the tool's output `Error <CODE> (HTTP <status>): …` — the SDK's way of reporting a tool
error to the model without failing the run. Transport failures (the server unreachable) are not
refusals: they raise and fail the run, like any tool exception.
"""

from __future__ import annotations

import json
from typing import Any

try:
    from agents import FunctionTool, RunContextWrapper
except ImportError as exc:  # pragma: no cover - exercised by installing without the extra
    raise ImportError(
        "governed_memory.openai_agents needs the OpenAI Agents SDK: pip install './clients/python[openai-agents]' "
        "(from the project's checkout)"
    ) from exc

from governed_memory.client import AsyncMemoryClient, MemoryClient
from governed_memory.tools import TOOLS, ToolRefusal, arun_tool, tool_spec


def memory_tool(client: AsyncMemoryClient | MemoryClient, operation: str) -> FunctionTool:
    spec = tool_spec(operation)

    async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return "Error VALIDATION_ERROR (HTTP 400): The tool arguments are not valid JSON."
        if not isinstance(parsed, dict):
            return "Error VALIDATION_ERROR (HTTP 400): The tool arguments must be a JSON object."
        try:
            return await arun_tool(client, operation, parsed)
        except ToolRefusal as refusal:
            return refusal.text

    # Not strict: the bodies have optional fields, which OpenAI's strict mode cannot express.
    return FunctionTool(
        name=spec["name"],
        description=spec["description"],
        params_json_schema=spec["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def memory_tools(client: AsyncMemoryClient | MemoryClient) -> list[FunctionTool]:
    """The four tools over one client (a sync client runs in a worker thread)."""
    return [memory_tool(client, operation) for operation in TOOLS]
