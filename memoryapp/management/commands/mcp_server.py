"""`manage.py mcp_server`: the MCP tools over stdio for one agent credential.

The token is read from the environment variable AGENT_MEMORY_TOKEN, once, at start; there is no
command-line option for it, because arguments show up in process listings and shell history.
Nothing but MCP messages may go to stdout: Django's logging writes to stderr.
"""

from __future__ import annotations

import os

import anyio
from django.core.management.base import BaseCommand, CommandError

from memoryapp.mcp import build_server, fixed_token

TOKEN_VARIABLE = "AGENT_MEMORY_TOKEN"


class Command(BaseCommand):
    help = f"Serve the agent-memory MCP tools over stdio; the agent credential token comes from {TOKEN_VARIABLE}."
    requires_system_checks: list[str] = []  # an MCP client waits on start-up; checks run with the web server

    def handle(self, *args: object, **options: object) -> None:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
        if not token:
            raise CommandError(f"Set {TOKEN_VARIABLE} to an agent credential token (Settings → Agent access).")
        anyio.run(build_server(fixed_token(token)).run_stdio_async)
