"""Attack on the run command's banner (7ec5f67): PORT that is no TCP port. PORT=0 makes uvicorn
listen on a port of the kernel's choice while the script waits for 127.0.0.1:0 to answer: it waits
forever, prints no address, and the product runs where nobody is told. 'abc' and '70000' stop only
after the migrations, with uvicorn's or Python's message ("OverflowError: bind(): port must be
0-65535"), which does not name PORT."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("port", ["0", "abc", "70000", "80 80"])
def test_a_port_that_is_no_tcp_port_stops_the_command_with_a_message_naming_port(tmp_path, port):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"}}
    env.update(PORT=port, VAR_DIR=str(tmp_path / "var"))
    process = subprocess.Popen(
        ["bash", "scripts/run.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=30)
        pytest.fail(f"PORT={port!r}: still running after 90 s, no address printed")
    assert process.returncode != 0
    assert "http://" not in out
    assert f"PORT={port}" in err or f"PORT {port!r}" in err or "PORT" in err.split("Traceback")[0], err[-500:]
