"""Progress on long commands: `reembed`, `run_periodic_jobs` and `verify_forgetting` draw a bar on
a terminal (a real pseudo-terminal here) and stay silent and machine-readable on a pipe or with
`--json`. They run as separate processes against a small deployment of their own (SQLite under a
temporary VAR_DIR), as an operator would run them."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BAR = "100%|"  # tqdm's finished bar: percentage, then the bar's left edge

SEED = """
from governance import actions
from memoryapp.models import MemoryEmbedding
from tests.support import make_agent
workspace, owner = actions.create_workspace("Progress", owner_email="owner@progress.test")
actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=owner.user)
owner.refresh_from_db()
agent = make_agent(owner)
for i in range(100):
    response = agent.remember(namespace="notes", text=f"Note number {chr(97 + i % 26)} about the quarterly plan")
    assert response.status_code == 201
print(workspace.pk)
"""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    var = tmp_path_factory.mktemp("progress-var")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PROMETHEUS_MULTIPROC_DIR")
    }
    env.update(
        VAR_DIR=str(var),
        PYTHONPATH=str(ROOT),
        CELERY_TASK_ALWAYS_EAGER="1",
        DJANGO_SETTINGS_MODULE="config.settings",
        MEMORY_EMBEDDER="hashing",
    )
    manage(env, "migrate", "--noinput")
    workspace_id = manage(env, "shell", "-c", SEED).stdout.strip().splitlines()[-1]
    return env, workspace_id


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=300
    )


def on_a_terminal(env: dict[str, str], *args: str) -> str:
    """Run a command with stdin, stdout and stderr on a pseudo-terminal; what the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**env, "TERM": "xterm"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert process.wait(timeout=300) in (0, 1), shown.decode(errors="replace")
    return shown.decode(errors="replace")


def forget_embeddings(env: dict[str, str]) -> None:
    manage(env, "shell", "-c", "from memoryapp.models import MemoryEmbedding; MemoryEmbedding.objects.all().delete()")


def test_reembed_draws_a_bar_on_a_terminal(deployment):
    env, _ = deployment
    forget_embeddings(env)
    shown = on_a_terminal(env, "reembed", "--batch-size", "20")
    assert BAR in shown and "reembed" in shown and "100/100" in shown and "version" in shown
    assert "\r" in shown  # redrawn in place
    assert "Re-embedded 100 memory versions with hashing" in shown


def test_reembed_is_quiet_on_a_pipe_and_prints_json_when_asked(deployment):
    env, _ = deployment
    forget_embeddings(env)
    piped = manage(env, "reembed", "--batch-size", "20")
    assert (
        piped.stdout.startswith("Re-embedded 100 memory versions with hashing") and len(piped.stdout.splitlines()) == 1
    )
    assert "%|" not in piped.stderr and "%|" not in piped.stdout
    forget_embeddings(env)
    shown = on_a_terminal(env, "reembed", "--json")
    assert BAR not in shown and "%|" not in shown
    assert json.loads(shown.strip())["reembedded"] == 100


def test_run_periodic_jobs_draws_a_bar_on_a_terminal_and_not_on_a_pipe(deployment):
    env, _ = deployment
    shown = on_a_terminal(env, "run_periodic_jobs")
    assert BAR in shown and "periodic jobs" in shown and "expiry_sweep: {" in shown
    piped = manage(env, "run_periodic_jobs")
    assert "%|" not in piped.stderr and "%|" not in piped.stdout
    assert [line.split(":")[0] for line in piped.stdout.splitlines()][:3] == [
        "expiry_sweep",
        "cascade_sweep",
        "grace_purge",
    ]
    as_json = on_a_terminal(env, "run_periodic_jobs", "--json")
    assert "%|" not in as_json and "expiry_sweep" in json.loads(as_json.strip())


def test_verify_forgetting_draws_a_bar_on_a_terminal_and_not_on_a_pipe(deployment):
    env, workspace_id = deployment
    shown = on_a_terminal(env, "verify_forgetting", "--workspace", workspace_id)
    assert BAR in shown and "forgetting check" in shown and "CLEAN" in shown
    piped = manage(env, "verify_forgetting", "--workspace", workspace_id, "--json")
    assert "%|" not in piped.stderr and json.loads(piped.stdout)["clean"] is True
