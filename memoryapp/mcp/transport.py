"""Streamable HTTP at `/mcp` (`config.asgi`, `Authorization: Bearer <token>` read on every
request), and the ASGI application that routes `/mcp` to it and everything else to Django."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from django.conf import settings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from core.errors import error_body
from governance.auth import bearer_token
from memoryapp.mcp.tools import build_server, request_bearer_token


def transport_security() -> TransportSecuritySettings:
    hosts = list(settings.MCP_ALLOWED_HOSTS)
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    payload = json.dumps(body).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})


class MCPHttpApp:
    """Streamable HTTP, stateless and JSON-answering: every POST stands alone, so any number of web
    processes can serve one client, and each request is authorised by its own bearer token.

    A request without a bearer token is answered 401 here; a token that is unknown, revoked or
    expired gets the UNAUTHENTICATED tool error from the gate on each tool call (the same rows as REST)."""

    def __init__(self) -> None:
        self.server = build_server(request_bearer_token)
        # The SDK's own app for the path, run inside our lifespan (see `with_mcp`), not its own.
        self.app = self.server.streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=True,
            transport_security=transport_security(),
            max_request_body_size=settings.MAX_REQUEST_BODY_BYTES,
        )
        self.running = False

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            self.running = True
            try:
                yield
            finally:
                self.running = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if scope["method"] != "POST":
            # Stateless: no session to delete, no stream to listen on (the SDK would hold a GET open).
            await _send_json(
                send, 405, error_body("METHOD_NOT_ALLOWED", "POST JSON-RPC messages to /mcp."), {"Allow": "POST"}
            )
            return
        if not self.running:
            await _send_json(
                send,
                503,
                error_body(
                    "MCP_NOT_STARTED",
                    "The MCP transport starts with the ASGI lifespan; run the server with lifespan on.",
                ),
            )
            return
        if bearer_token(headers.get("authorization")) is None:
            await _send_json(
                send,
                401,
                error_body("UNAUTHENTICATED", "Send Authorization: Bearer <agent credential token>."),
                {"WWW-Authenticate": 'Bearer realm="agent-memory"'},
            )
            return
        await self.app(scope, receive, send)


def is_mcp_path(path: str) -> bool:
    return path in ("/mcp", "/mcp/")


def with_mcp(django_app: ASGIApp) -> ASGIApp:
    """The project's ASGI application: `/mcp` to the MCP transport, everything else to Django,
    and the ASGI lifespan (which Django does not speak) running the MCP session manager."""
    mcp_app = MCPHttpApp()

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _serve_lifespan(mcp_app, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1003})  # nothing here speaks WebSocket
        elif scope["type"] == "http" and is_mcp_path(scope["path"]):
            if scope["path"] == "/mcp/":
                scope = {**scope, "path": "/mcp", "raw_path": b"/mcp"}
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application


async def _serve_lifespan(mcp_app: MCPHttpApp, receive: Receive, send: Send) -> None:
    if (await receive())["type"] != "lifespan.startup":
        return
    started = False
    try:
        async with mcp_app.lifespan():
            await send({"type": "lifespan.startup.complete"})
            started = True
            while (await receive())["type"] != "lifespan.shutdown":
                pass
    except Exception as exc:
        if not started:
            await send(
                {"type": "lifespan.startup.failed", "message": f"MCP transport failed to start: {type(exc).__name__}"}
            )
            return
        await send(
            {"type": "lifespan.shutdown.failed", "message": f"MCP transport failed to stop: {type(exc).__name__}"}
        )
        return
    await send({"type": "lifespan.shutdown.complete"})
