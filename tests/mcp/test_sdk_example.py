"""The README's MCP SDK example (clients/python/examples/mcp_sdk_client.py) runs as written against
the README's HTTP server: the SDK's client sends the bearer header on every request, the memory is
masked, recalled and fenced; a token the server does not know reaches no memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.processes import BASE_DIR
from tests.support import make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EXAMPLE = BASE_DIR / "clients" / "python" / "examples" / "mcp_sdk_client.py"


def run_example(base: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAM_")} | {"GAM_URL": base, "GAM_TOKEN": token}
    return subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120)


def test_the_mcp_sdk_example_remembers_and_recalls_with_the_bearer_header(world, http_server):
    agent = make_agent(world.editor)
    completed = run_example(http_server, agent.token)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert 'key="seat"' in completed.stdout
    assert 'trust="untrusted" evidence="false">Prefers an aisle seat; tickets to [EMAIL]</memory>' in completed.stdout
    assert world.editor.memory_versions.filter(namespace="travel", key="seat").count() == 1


def test_the_mcp_sdk_example_with_an_unknown_token_reaches_no_memory(world, http_server):
    make_agent(world.editor)
    completed = run_example(http_server, "gam_000000000000_not-a-token")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.startswith("Error UNAUTHENTICATED")
    assert "<memory" not in completed.stdout
    assert not world.editor.memory_versions.exists()
