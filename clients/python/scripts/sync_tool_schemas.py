"""Regenerate src/governed_memory/tool_schemas.json from a running server: the REST request
bodies of /api/schema/ as JSON Schema, with the MCP server's tool and field descriptions.

    python clients/python/scripts/sync_tool_schemas.py --url http://127.0.0.1:8000 --token gam_…
    python clients/python/scripts/sync_tool_schemas.py          # starts the product itself (SQLite)

The client's suite (tests/test_tools.py) fails while the shipped file differs from what a live
server derives, so a serializer change on the server cannot drift silently."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
TARGET = HERE.parent / "src" / "governed_memory" / "tool_schemas.json"


def mcp_tools(url: str, token: str) -> dict[str, dict[str, Any]]:
    async def scenario() -> dict[str, dict[str, Any]]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return {
                t.name: {"description": t.description, "inputSchema": t.input_schema}
                for t in (await client.list_tools()).tools
            }

    return anyio.run(scenario)


def derive(url: str, token: str) -> dict[str, Any]:
    from governed_memory.tools import tool_specs_from

    openapi = httpx.get(f"{url}/api/schema/", params={"format": "json"}, timeout=30).raise_for_status().json()
    return tool_specs_from(openapi, mcp_tools(url, token))


def dump(specs: dict[str, Any]) -> str:
    return json.dumps(specs, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("--token")
    args = parser.parse_args()
    if args.url and args.token:
        specs = derive(args.url, args.token)
    else:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from live_server import LiveServer

        server = LiveServer(Path(tempfile.mkdtemp(prefix="gam-schemas-")))
        server.start()
        try:
            (workspace,) = server.workspaces(("Schemas", ("agent",), ()))
            specs = derive(server.url(), workspace.members["agent"].credential(("memory:read",)))
        finally:
            server.stop()
    TARGET.write_text(dump(specs), encoding="utf-8")
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
