import asyncio
import os

import httpx2  # the HTTP client of the official MCP SDK 2.x (pip install "mcp>=2.3,<3")
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url = os.environ.get("GAM_URL", "http://127.0.0.1:8000") + "/mcp"
    bearer = {"Authorization": f"Bearer {os.environ['GAM_TOKEN']}"}  # the SDK sends these headers with every request
    async with httpx2.AsyncClient(headers=bearer) as http, Client(streamable_http_client(url, http_client=http)) as mcp:
        await mcp.call_tool(
            "remember_memory",
            {"namespace": "travel", "key": "seat", "text": "Prefers an aisle seat; tickets to ada@example.com"},
        )
        recalled = await mcp.call_tool("recall_memories", {"query": "which seat on a plane?", "namespace": "travel"})
        print(recalled.content[0].text)  # fenced, marked untrusted; recalled.structured_content is the REST JSON


asyncio.run(main())
