"""The README's examples are these files, verbatim, and the ones that need no model run against
the live product as a user runs them: GAM_URL and GAM_TOKEN in the environment, nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import World

from live_server import REPO, LiveServer

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_the_readme_shows_each_example_verbatim(name: str):
    code = (EXAMPLES / name).read_text()
    assert f"```python\n{code}```" in (REPO / "README.md").read_text()
    compile(code, name, "exec")


def run_example(name: str, live: LiveServer, token: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAM_")} | {"GAM_URL": live.url(), "GAM_TOKEN": token}
    completed = subprocess.run([sys.executable, str(EXAMPLES / name)], env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_the_client_example_runs(live: LiveServer, world: World):
    out = run_example("client_remember_recall.py", live, world.member("examples").credential())
    assert 'trust="untrusted" evidence="false">Prefers an aisle seat; tickets to [EMAIL]</memory>' in out
    assert "1 Prefers an aisle seat; tickets to [EMAIL] ['EMAIL']" in out
    assert "AGENT_MEMORY_PERSONAL_DATA" in out


def test_the_langgraph_example_remembers_in_one_run_and_recalls_in_the_next(live: LiveServer, world: World):
    token = world.member("examples-graph").credential()
    assert run_example("langgraph_remember_recall.py", live, token).strip() == "['Prefers an aisle seat; tickets to [EMAIL]']"
    assert run_example("langgraph_remember_recall.py", live, token).strip() == "['Prefers an aisle seat; tickets to [EMAIL]']"  # again: a new version, same answer
