"""The four memory operations as framework-neutral tools, like the server's MCP tools.

Each tool takes the REST body as its arguments and hands it to the server unchanged (the server
validates, so a tool and the REST API cannot disagree), answers the MCP tools' text — the
untrusted header, a summary, the fenced memories — and turns a refusal into a tool error carrying
the REST code: `Error AGENT_MEMORY_DISABLED (HTTP 403): … Details: {…}`, the MCP server's wording.

The argument schemas (`tool_schemas.json`) are the REST request bodies as `/api/schema/` serves
them (`RememberBodyRequest`, …) converted to plain JSON Schema, with the tool and field
descriptions the MCP server gives; `scripts/sync_tool_schemas.py` regenerates the file from a
running server and the client's suite fails when it is out of date."""

from __future__ import annotations

import json
from copy import deepcopy
from functools import cache
from importlib import resources
from typing import Any

import anyio.to_thread

from governed_memory.client import AsyncMemoryClient, MemoryClient
from governed_memory.errors import APIError
from governed_memory.models import ForgetResult, ListPage, RecallResult, RememberResult

#: operation → (tool name, the request body's component in /api/schema/)
TOOLS = {
    "remember": ("remember_memory", "RememberBodyRequest"),
    "recall": ("recall_memories", "RecallBodyRequest"),
    "list": ("list_memories", "ListBodyRequest"),
    "forget": ("forget_memory", "ForgetBodyRequest"),
}
RESULTS = {"remember": RememberResult, "recall": RecallResult, "list": ListPage, "forget": ForgetResult}


class ToolRefusal(Exception):
    """A refusal as a tool error: `text` is what the model reads, `error` the client's exception."""

    def __init__(self, error: APIError):
        self.error = error
        self.text = error_text(error)
        super().__init__(self.text)


def error_text(error: APIError) -> str:
    details = f" Details: {json.dumps(error.details, ensure_ascii=False, sort_keys=True)}" if error.details else ""
    return f"Error {error.code} (HTTP {error.status}): {error.message}{details}"


@cache
def _specs() -> dict[str, Any]:
    return json.loads(resources.files("governed_memory").joinpath("tool_schemas.json").read_text(encoding="utf-8"))


def tool_spec(operation: str) -> dict[str, Any]:
    """`{"name", "description", "parameters"}` of one tool (a copy: frameworks may edit it)."""
    return deepcopy(_specs()[operation])


def result_text(operation: str, data: dict[str, Any]) -> str:
    return RESULTS[operation].from_json(data).render()


def run_tool(client: MemoryClient, operation: str, arguments: dict[str, Any]) -> str:
    try:
        return result_text(operation, client.call(operation, dict(arguments)))
    except APIError as error:
        raise ToolRefusal(error) from error


async def arun_tool(client: AsyncMemoryClient | MemoryClient, operation: str, arguments: dict[str, Any]) -> str:
    if isinstance(client, MemoryClient):
        return await anyio.to_thread.run_sync(run_tool, client, operation, arguments)
    try:
        return result_text(operation, await client.call(operation, dict(arguments)))
    except APIError as error:
        raise ToolRefusal(error) from error


# --- /api/schema/ → JSON Schema (used by scripts/sync_tool_schemas.py and the suite) ---------------
def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _resolve(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    return schema


def json_schema(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """One OpenAPI 3.0 schema as JSON Schema: references inlined, `nullable` as a null branch,
    enum components without their generated descriptions."""
    schema = _resolve(schema, components)
    out: dict[str, Any] = {}
    nullable = schema.get("nullable", False)
    for name, value in schema.items():
        if name in ("nullable", "description"):
            continue
        if name == "allOf" and len(value) == 1:
            out.update(json_schema(value[0], components))
        elif name in ("oneOf", "anyOf"):
            branches = [json_schema(v, components) for v in value]
            out["anyOf"] = branches
        elif name == "items":
            out["items"] = json_schema(value, components)
        elif name == "properties":
            out["properties"] = {k: json_schema(v, components) for k, v in value.items()}
        elif name == "enum" and value == [None]:
            out["type"] = "null"
        else:
            out[name] = value
    if nullable and "anyOf" not in out:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def tool_specs_from(openapi: dict[str, Any], mcp_tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The tools' specs from the served OpenAPI document and the MCP server's tool list
    (`{name: {"description", "inputSchema"}}`), whose descriptions they take."""
    components = openapi["components"]["schemas"]
    specs: dict[str, Any] = {}
    for operation, (name, component) in TOOLS.items():
        body = components[component]
        parameters = json_schema(body, components)
        parameters["additionalProperties"] = False  # the REST bodies refuse unknown fields (StrictSerializer)
        parameters.setdefault("required", [])
        mcp = mcp_tools[name]
        for field, schema in parameters["properties"].items():
            description = mcp["inputSchema"]["properties"].get(field, {}).get("description")
            if description:
                schema["description"] = description
        specs[operation] = {"name": name, "description": mcp["description"], "parameters": parameters}
    return specs
