"""MCP over its two real transports, with the SDK's own clients: stdio (the management command as a
subprocess) and streamable HTTP (uvicorn serving config.asgi:application on loopback).

The servers are other processes, so the tests commit their data (transactional tests) and point
the servers at the test database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from django.db import connection
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from governance import actions as g
from memoryapp.mcp import UNTRUSTED_HEADER
from tests.processes import BASE_DIR, server_env
from tests.support import make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOOL_NAMES = {"remember_memory", "recall_memories", "list_memories", "forget_memory"}


def run(test: Callable[[], Awaitable[Any]]) -> Any:
    return anyio.run(test)


def stdio_params(token: str | None) -> StdioServerParameters:
    env = server_env() if token is None else server_env(AGENT_MEMORY_TOKEN=token)
    return StdioServerParameters(
        command=sys.executable, args=[str(BASE_DIR / "manage.py"), "mcp_server"], env=env, cwd=str(BASE_DIR)
    )


def error_of(result) -> tuple[str, dict]:
    assert result.is_error, result
    error = result.structured_content["error"]
    assert result.content[0].text.startswith(f"Error {error['code']} ")
    return error["code"], error


def ok(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def assert_fenced(result, memories: list[dict]) -> None:
    lines = result.content[0].text.split("\n")
    # the header once when the answer holds memories, none otherwise
    assert lines.count(UNTRUSTED_HEADER) == (1 if memories else 0) and (lines[0] == UNTRUSTED_HEADER) == bool(memories)
    fences = [line for line in lines if line.startswith("<memory ")]
    assert len(fences) == len(memories)
    for line, memory in zip(fences, memories):
        assert f'id="{memory["id"]}"' in line and 'trust="untrusted"' in line and 'evidence="false"' in line
        assert line.endswith("</memory>")


# --- stdio ---------------------------------------------------------------------------------------
def test_stdio_server_lists_the_four_tools_with_the_rest_bodies_as_schemas(world):
    agent = make_agent(world.editor)

    async def scenario():
        async with Client(stdio_params(agent.token)) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(scenario)}
    assert set(tools) == TOOL_NAMES
    remember = tools["remember_memory"].input_schema
    assert remember["required"] == ["namespace", "text"]
    assert remember["properties"]["namespace"]["maxLength"] == 64
    assert remember["properties"]["text"]["maxLength"] == 1000
    assert remember["properties"]["citations"]["maxItems"] == 20
    assert tools["recall_memories"].input_schema["properties"]["limit"]["maximum"] == 50
    assert tools["list_memories"].input_schema["properties"]["limit"]["maximum"] == 100
    assert tools["recall_memories"].annotations.read_only_hint is True
    assert tools["forget_memory"].annotations.destructive_hint is True


def test_stdio_remember_recall_list_forget_match_rest(world):
    agent = make_agent(world.editor)

    async def scenario():
        async with Client(stdio_params(agent.token)) as client:
            remembered = await client.call_tool(
                "remember_memory",
                {"namespace": "prefs", "key": "tea", "text": "Prefers green tea; mail jane@example.com"},
            )
            again = await client.call_tool(
                "remember_memory", {"namespace": "prefs", "key": "tea", "text": "Prefers jasmine green tea"}
            )
            recalled = await client.call_tool("recall_memories", {"query": "which tea does she like"})
            listed = await client.call_tool("list_memories", {})
            rest = await orm(lambda: agent.list().json())  # the same credential over REST, the same moment
            forgotten = await client.call_tool("forget_memory", {"namespace": "prefs", "key": "tea"})
            after = await client.call_tool("list_memories", {})
            return remembered, again, recalled, listed, rest, forgotten, after

    remembered, again, recalled, listed, rest, forgotten, after = run(scenario)
    memory = ok(remembered)["memory"]
    assert (
        memory["text"] == "Prefers green tea; mail [EMAIL]"
        and memory["trust"] == "untrusted"
        and memory["evidence"] is False
    )
    assert remembered.structured_content["superseded"] == 0
    assert_fenced(remembered, [memory])
    assert ok(again)["superseded"] == 1
    current = again.structured_content["memory"]

    assert [m["id"] for m in recalled.structured_content["memories"]] == [current["id"]]
    assert set(recalled.structured_content) == {"memories", "hidden", "considered", "degraded"}
    assert_fenced(recalled, recalled.structured_content["memories"])

    assert listed.structured_content == rest
    assert_fenced(listed, rest["memories"])

    assert forgotten.structured_content["forgotten"] == 2 and forgotten.structured_content["receiptId"]
    assert after.structured_content == {"memories": [], "hidden": 0, "nextCursor": None}


def test_stdio_refusals_are_tool_errors_with_the_rest_codes(world):
    reader = make_agent(world.editor, scopes=["memory:read"])

    async def scenario():
        async with Client(stdio_params(reader.token)) as client:
            no_scope = await client.call_tool("remember_memory", {"namespace": "prefs", "text": "x"})
            invalid = await client.call_tool("list_memories", {"limit": 0, "namespace": ""})
            forget_without_scope = await client.call_tool("forget_memory", {"memoryId": "not an id"})
            await orm(
                lambda: g.update_settings(world.workspace, {"agentMemoriesEnabled": False}, actor=world.owner.user)
            )
            disabled = await client.call_tool("list_memories", {})
            still_alive = await client.list_tools()
            return no_scope, invalid, forget_without_scope, disabled, still_alive

    no_scope, invalid, forget_without_scope, disabled, still_alive = run(scenario)
    assert error_of(no_scope)[0] == "INSUFFICIENT_SCOPE"
    assert error_of(forget_without_scope)[0] == "INSUFFICIENT_SCOPE"  # the credential is judged before the body
    code, error = error_of(invalid)
    assert code == "VALIDATION_ERROR" and error["details"]["fields"].keys() == {"limit", "namespace"}
    code, error = error_of(disabled)
    assert code == "AGENT_MEMORY_DISABLED" and error["details"] == {"reason": "workspace"}
    assert error == reader.list().json()["error"]
    g.update_settings(world.workspace, {"agentMemoriesEnabled": True}, actor=world.owner.user)
    assert (
        invalid.structured_content == reader.list(limit=0, namespace="").json()
    )  # same code, message, per-field details
    assert {tool.name for tool in still_alive.tools} == TOOL_NAMES  # a refusal never ends the session


async def orm(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a synchronous action from inside the event loop, on a thread whose connection is closed after."""

    def call() -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()

    return await anyio.to_thread.run_sync(call)


def test_stdio_unknown_token_is_unauthenticated_and_missing_token_refuses_to_start(world):
    async def scenario():
        async with Client(stdio_params("gam_000000000000_not-a-token")) as client:
            return await client.call_tool("list_memories", {})

    assert error_of(run(scenario))[0] == "UNAUTHENTICATED"

    started = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "mcp_server"],
        env={"PATH": os.environ.get("PATH", "")} | server_env(),
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert started.returncode != 0
    assert "AGENT_MEMORY_TOKEN" in started.stderr and started.stdout == ""


# --- streamable HTTP -------------------------------------------------------------------------------


def http_client(base: str, token: str | None, mode: str = "auto") -> tuple[Client, httpx2.AsyncClient]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    session = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(f"{base}/mcp", http_client=session), mode=mode), session


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the newest protocol, and the initialize handshake
def test_http_remember_recall_list_forget_match_rest(world, http_server, mode):
    agent = make_agent(world.editor)

    async def scenario():
        client, session = http_client(http_server, agent.token, mode)
        async with session, client:
            if mode == "legacy":
                assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            tools = (await client.list_tools()).tools
            remembered = await client.call_tool(
                "remember_memory", {"namespace": "travel", "key": "seat", "text": "Likes an aisle seat on long flights"}
            )
            recalled = await client.call_tool("recall_memories", {"query": "aisle seat", "limit": 5})
            listed = await client.call_tool("list_memories", {"namespace": "travel"})
            forgotten = await client.call_tool("forget_memory", {"memoryId": ok(remembered)["memory"]["id"]})
            gone = await client.call_tool("recall_memories", {"query": "aisle seat"})
            return tools, remembered, recalled, listed, forgotten, gone

    tools, remembered, recalled, listed, forgotten, gone = run(scenario)
    assert {tool.name for tool in tools} == TOOL_NAMES
    memory = ok(remembered)["memory"]
    assert [m["id"] for m in ok(recalled)["memories"]] == [memory["id"]]
    assert recalled.structured_content["memories"][0]["score"] > 0
    assert_fenced(recalled, recalled.structured_content["memories"])
    assert listed.structured_content["memories"] == [memory]
    assert forgotten.structured_content["forgotten"] == 1
    assert gone.structured_content["memories"] == []


def test_http_refusals_disabled_scope_and_rate_limit_are_tool_errors(world, http_server):
    writer = make_agent(world.editor, scopes=["memory:write"])
    for i in range(120):
        assert writer.remember(namespace="bulk", text=f"note number {i}").status_code == 201
    rest_limited = writer.remember(namespace="bulk", text="one too many").json()

    async def scenario():
        client, session = http_client(http_server, writer.token)
        async with session, client:
            limited = await client.call_tool("remember_memory", {"namespace": "bulk", "text": "one too many"})
            no_scope = await client.call_tool("list_memories", {})
            return limited, no_scope

    limited, no_scope = run(scenario)
    code, error = error_of(limited)
    assert code == "AGENT_MEMORY_RATE_LIMITED"
    assert error["message"] == rest_limited["error"]["message"]
    assert 0 < error["details"]["retryAfterSeconds"] <= 3600
    assert error_of(no_scope)[0] == "INSUFFICIENT_SCOPE"

    g.set_remember_me(world.editor, False)
    reader = make_agent(world.editor, scopes=["memory:read"])

    async def disabled_scenario():
        client, session = http_client(http_server, reader.token)
        async with session, client:
            return await client.call_tool("recall_memories", {"query": "anything"})

    code, error = error_of(run(disabled_scenario))
    assert code == "AGENT_MEMORY_DISABLED" and error["details"] == {"reason": "member"}


def test_http_token_is_read_per_request_and_never_reaches_another_members_memories(world, http_server):
    editor = make_agent(world.editor)
    colleague = make_agent(world.owner)  # same workspace, another member
    outsider = make_agent(world.outsider)  # another workspace
    secret = "Editor's private note about the Q3 reorg"

    async def scenario():
        client, session = http_client(http_server, editor.token)
        async with session, client:
            mine = await client.call_tool("remember_memory", {"namespace": "work", "key": "reorg", "text": secret})
            memory_id = ok(mine)["memory"]["id"]
            seen = {}
            # One MCP connection, the header switched between requests: each call is judged by its own token.
            for name, token in (("colleague", colleague.token), ("outsider", outsider.token)):
                session.headers["Authorization"] = f"Bearer {token}"
                seen[name] = [
                    await client.call_tool("list_memories", {}),
                    await client.call_tool("list_memories", {"namespace": "work", "key": "reorg"}),
                    await client.call_tool("recall_memories", {"query": "Q3 reorg private note"}),
                    await client.call_tool("forget_memory", {"memoryId": memory_id}),
                    await client.call_tool("forget_memory", {"namespace": "work", "key": "reorg"}),
                ]
            session.headers["Authorization"] = "Bearer gam_000000000000_not-a-token"
            unknown = await client.call_tool("list_memories", {})
            session.headers["Authorization"] = f"Bearer {editor.token}"
            still_mine = await client.call_tool("list_memories", {})
            return memory_id, seen, unknown, still_mine

    memory_id, seen, unknown, still_mine = run(scenario)
    for name, (listed, by_key, recalled, forget_by_id, forget_by_key) in seen.items():
        assert listed.structured_content["memories"] == [], name
        assert by_key.structured_content["memories"] == [], name
        assert recalled.structured_content["memories"] == [], name
        assert error_of(forget_by_id)[0] == "MEMORY_NOT_FOUND", name
        assert error_of(forget_by_key)[0] == "MEMORY_NOT_FOUND", name
        for result in (listed, by_key, recalled, forget_by_id, forget_by_key):
            assert secret not in result.content[0].text and memory_id not in str(result.structured_content)
    assert error_of(unknown)[0] == "UNAUTHENTICATED"
    assert [m["id"] for m in still_mine.structured_content["memories"]] == [memory_id]


def test_http_revoked_token_is_refused_on_the_next_call(world, http_server):
    agent = make_agent(world.editor)

    async def scenario():
        client, session = http_client(http_server, agent.token)
        async with session, client:
            before = await client.call_tool("list_memories", {})
            await orm(revoke_all, world.editor)
            after = await client.call_tool("list_memories", {})
            return before, after

    before, after = run(scenario)
    assert not before.is_error
    assert error_of(after)[0] == "UNAUTHENTICATED"


def revoke_all(member) -> None:
    from governance.models import Credential

    for credential in Credential.objects.filter(member=member):
        g.revoke_credential(credential, actor=member.user)


def test_http_without_bearer_token_is_401_and_django_still_serves_the_rest(world, http_server):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    response = httpx2.post(f"{http_server}/mcp", json=initialize, headers=accept)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"
    assert response.headers["www-authenticate"].startswith("Bearer")
    wrong_scheme = httpx2.post(
        f"{http_server}/mcp", json=initialize, headers=accept | {"Authorization": "Basic dXNlcjpwdw=="}
    )
    assert wrong_scheme.status_code == 401

    agent = make_agent(world.editor)
    foreign_host = httpx2.post(
        f"{http_server}/mcp",
        json=initialize,
        headers=accept | {"Authorization": f"Bearer {agent.token}", "Host": "evil.example"},
    )
    assert foreign_host.status_code == 421  # not in MCP_ALLOWED_HOSTS: the SDK's DNS-rebinding guard
    listen = httpx2.get(f"{http_server}/mcp", headers=accept | {"Authorization": f"Bearer {agent.token}"}, timeout=10)
    assert listen.status_code == 405 and listen.headers["allow"] == "POST"  # stateless: no stream is held open

    assert httpx2.get(f"{http_server}/accounts/login/").status_code == 200
    api = httpx2.post(
        f"{http_server}/api/agent/v1/memories/list", json={}, headers={"Authorization": f"Bearer {agent.token}"}
    )
    assert api.status_code == 200 and api.json()["memories"] == []
    oversized = httpx2.post(
        f"{http_server}/mcp",
        content=b"x" * (70 * 1024),
        headers=accept | {"Authorization": f"Bearer {agent.token}", "Content-Type": "application/json"},
    )
    assert oversized.status_code == 413
