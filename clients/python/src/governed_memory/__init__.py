"""Typed Python client for governed agent memory (docs/clients.md in the server's repository).

    from governed_memory import MemoryClient
    with MemoryClient() as memory:            # GAM_URL (default http://127.0.0.1:8000), GAM_TOKEN
        memory.remember("prefs", "Prefers vim", key="editor")
        print(memory.recall("which editor?").render())   # fenced like the MCP text output

Framework adapters, each importable once its framework is installed (extras):
`governed_memory.langgraph` (`[langgraph]`), `governed_memory.openai_agents` (`[openai-agents]`),
`governed_memory.pydantic_ai` (`[pydantic-ai]`)."""

from governed_memory import errors
from governed_memory.client import DEFAULT_URL, AsyncMemoryClient, MemoryClient
from governed_memory.errors import APIError, GovernedMemoryError
from governed_memory.fence import UNTRUSTED_HEADER, fence, render_memories
from governed_memory.models import (
    Citation,
    ForgetResult,
    ListPage,
    Memory,
    Ranks,
    RecalledMemory,
    RecallResult,
    RememberResult,
    TurnResult,
)
from governed_memory.retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RETRY",
    "DEFAULT_URL",
    "NO_RETRY",
    "UNTRUSTED_HEADER",
    "APIError",
    "AsyncMemoryClient",
    "Citation",
    "ForgetResult",
    "GovernedMemoryError",
    "ListPage",
    "Memory",
    "MemoryClient",
    "Ranks",
    "RecallResult",
    "RecalledMemory",
    "RememberResult",
    "RetryPolicy",
    "TurnResult",
    "errors",
    "fence",
    "render_memories",
]
