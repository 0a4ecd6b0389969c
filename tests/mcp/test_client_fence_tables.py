"""The Python client renders memories like the MCP text output without the server's Unicode data
packages: it reads the server fence's decisions from clients/python/.../fence_tables.json. A
fence change that is not re-synced (clients/python/scripts/sync_fence_tables.py) fails here,
before the live client suite."""

import importlib
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

server = importlib.import_module("memoryapp.mcp.fence")  # the module (memoryapp.mcp exports a function `fence`)

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"


def client_fence():
    if str(CLIENT_SRC) not in sys.path:
        sys.path.insert(0, str(CLIENT_SRC))
    return importlib.import_module("governed_memory.fence")


TAGS = st.sampled_from(["memory", "MEMORY", "мемоrу", "rnemory", "m\u200demory", "/memory", "</memory>"])
ANY = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=20)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(ANY, TAGS), max_size=6).map("".join))
def test_the_clients_fence_escapes_exactly_like_the_servers(text):
    client = client_fence()
    assert client.fence_escape(text) == server.fence_escape(text)
    assert client.fence_escape(text, attribute=True) == server.fence_escape(text, attribute=True)


def test_every_code_point_is_escaped_alike():
    client = client_fence()
    assert [
        c for c in range(0x110000) if client._needs_numeric_escape(chr(c)) != server._needs_numeric_escape(chr(c))
    ] == []
